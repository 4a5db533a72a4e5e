"""SQuAD exact match and F1, reproducing the official evaluate-v1.1.py and evaluate-v2.0.py numbers.

Examples are any iterable of mappings shaped like the rows `tasks.squad_data` loads (and like the Hub's
`rajpurkar/squad`): {"id": str, "answers": {"text": [str, ...], ...}, ...}. An empty answer list means
the question is unanswerable (SQuAD 2.0); only "id" and "answers"["text"] are read.

One deliberate difference from the official scripts: a question with no prediction raises UserError.
evaluate-v1.1.py scores it 0 with a note on stderr and evaluate-v2.0.py crashes or skips it, and either
way a bug in the caller would pass as a low score.
"""

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping

from foundation.infra.errors import UserError

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the and collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    # A space, not "", as in the official script: "x–a–y" must split into two tokens, not fuse into one.
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> int:
    """1 if the normalised strings are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 of the normalised strings; if either has no tokens, 1.0 only when both are empty."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        # SQuAD 2.0 convention: an empty answer is right exactly when the gold is empty too.
        return float(pred_tokens == gold_tokens)
    num_same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _f1_v1(prediction: str, gold: str) -> float:
    # evaluate-v1.1.py has no empty-answer rule: no shared tokens means 0, even when both are empty.
    # dev-v1.1.json has 3 gold answers that normalise to nothing, so the rules do differ there.
    if not normalize_answer(prediction) or not normalize_answer(gold):
        return 0.0
    return f1(prediction, gold)


def _check_ids(values: Mapping[str, object], ids: list[str], what: str) -> None:
    missing = [qid for qid in ids if qid not in values]
    if missing:
        shown = ", ".join(repr(qid) for qid in missing[:3])
        raise UserError(
            f"{len(missing)} of {len(ids)} questions have no {what} (first: {shown}); "
            f"give one for every question id in the evaluated examples"
        )


def check_covered(predictions: Mapping[str, str], ids: Iterable[str],
                  null_odds: Mapping[str, float] | None = None) -> None:
    """UserError unless there are questions and each id has a prediction (and null odds, when given)."""
    ids = list(ids)
    if not ids:
        raise UserError("no examples to score; pass the SQuAD examples the predictions were made for")
    _check_ids(predictions, ids, "prediction")
    if null_odds is not None:
        _check_ids(null_odds, ids, "null odds")


def _gold_texts(examples: Iterable[Mapping]) -> dict[str, list[str]]:
    return {example["id"]: list(example["answers"]["text"]) for example in examples}


def squad_v1_scores(predictions: Mapping[str, str], examples: Iterable[Mapping]) -> dict[str, float]:
    """SQuAD 1.1 exact_match and f1 in percent, each the max over a question's gold answers."""
    golds = _gold_texts(examples)
    check_covered(predictions, golds)
    exact, f1_scores = _v1_question_scores(predictions, golds)
    return {"exact_match": 100.0 * sum(exact.values()) / len(golds),
            "f1": 100.0 * sum(f1_scores.values()) / len(golds)}


def _v1_question_scores(predictions, golds):
    # Each question scores its best gold answer, as evaluate-v1.1.py does.
    exact = {qid: max((exact_match(predictions[qid], g) for g in texts), default=0)
             for qid, texts in golds.items()}
    f1_scores = {qid: max((_f1_v1(predictions[qid], g) for g in texts), default=0.0)
                 for qid, texts in golds.items()}
    return exact, f1_scores


def _raw_scores(predictions, golds):
    exact_raw, f1_raw = {}, {}
    for qid, gold_texts in golds.items():
        # Golds that normalise to nothing ("!", "the") are dropped; none left means unanswerable.
        gold_texts = [text for text in gold_texts if normalize_answer(text)] or [""]
        exact_raw[qid] = max(exact_match(predictions[qid], gold) for gold in gold_texts)
        f1_raw[qid] = max(f1(predictions[qid], gold) for gold in gold_texts)
    return exact_raw, f1_raw


def _apply_null_threshold(scores, null_odds, has_answer, threshold):
    # Above the threshold the answer counts as "no answer", right exactly when the gold is empty.
    return {
        qid: float(not has_answer[qid]) if null_odds[qid] > threshold else score
        for qid, score in scores.items()
    }


def _mean_scores(exact_scores, f1_scores, qids):
    return {
        "exact": 100.0 * sum(exact_scores[qid] for qid in qids) / len(qids),
        "f1": 100.0 * sum(f1_scores[qid] for qid in qids) / len(qids),
        "total": len(qids),
    }


def _best_threshold(predictions, raw_scores, null_odds, has_answer):
    # Sweep thresholds upwards from "everything is no-answer": each question passed turns its prediction on,
    # gaining its raw score if answerable and losing 1 if unanswerable but answered.
    score = best_score = sum(1 for qid in has_answer if not has_answer[qid])
    best_threshold = 0.0  # the official starting value, even when all odds are negative
    for qid in sorted(null_odds, key=lambda qid: null_odds[qid]):
        if qid not in raw_scores:
            continue
        if has_answer[qid]:
            score += raw_scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best_score:
            best_score, best_threshold = score, null_odds[qid]
    return 100.0 * best_score / len(raw_scores), best_threshold


def squad_v2_scores(
    predictions: Mapping[str, str],
    examples: Iterable[Mapping],
    null_odds: Mapping[str, float] | None = None,
    threshold: float = 1.0,
) -> dict[str, float]:
    """SQuAD 2.0 scores as evaluate-v2.0.py prints them, with HasAns/NoAns parts and best thresholds.

    null_odds is the official na_prob: higher means more likely unanswerable; a question whose null_odds
    exceeds threshold is scored as answered "". HasAns_*/NoAns_* appear only when such questions exist and
    best_* only when null_odds is given, as in the official script. With `postprocess` null odds the
    predictions are already "" above its own threshold (0.0), so threshold=1.0 changes nothing there.
    """
    golds = _gold_texts(examples)
    check_covered(predictions, golds, null_odds)
    odds = {qid: 0.0 for qid in predictions} if null_odds is None else null_odds
    has_answer = {qid: bool(texts) for qid, texts in golds.items()}
    exact_raw, f1_raw = _raw_scores(predictions, golds)
    exact_final = _apply_null_threshold(exact_raw, odds, has_answer, threshold)
    f1_final = _apply_null_threshold(f1_raw, odds, has_answer, threshold)
    result = _mean_scores(exact_final, f1_final, list(golds))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has is wanted]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in _mean_scores(exact_final, f1_final, qids).items()})
    if null_odds is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, best_threshold = _best_threshold(predictions, raw, null_odds, has_answer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, best_threshold
    return result


def squad_scores(
    version: str,
    predictions: Mapping[str, str],
    examples: Iterable[Mapping],
    null_odds: Mapping[str, float] | None = None,
    null_threshold: float = 0.0,
) -> dict[str, float]:
    """A SQuAD version's official scores (percent) plus `score`, the F1 the harness ranks runs by.

    version: "1.1" or "2.0"; null_odds and null_threshold are read for 2.0 only. The threshold default is
    the harness's (null odds are logit differences), not evaluate-v2.0.py's 1.0 (a probability).
    """
    if version == "1.1":
        scores = squad_v1_scores(predictions, examples)
    elif version == "2.0":
        scores = squad_v2_scores(predictions, examples, null_odds, threshold=null_threshold)
    else:
        raise UserError(f"unknown SQuAD version {version!r}; choose one of 1.1, 2.0")
    return scores | {"score": scores["f1"]}


def question_scores(version: str, predictions: Mapping[str, str], examples: Iterable[Mapping],
                    null_odds: Mapping[str, float] | None = None,
                    null_threshold: float = 0.0) -> dict[str, dict[str, float]]:
    """Each question's exact and F1 score (percent), whose means are squad_scores' EM and F1.

    Keys as squad_scores names them: exact_match/f1 (1.1), exact/f1 (2.0, at null_threshold).
    Intervals and paired comparisons resample these (EM and F1 are means over questions).
    """
    examples = list(examples)
    golds = _gold_texts(examples)
    check_covered(predictions, golds, null_odds if version == "2.0" else None)
    if version == "1.1":
        exact, f1_scores = _v1_question_scores(predictions, golds)
        names = ("exact_match", "f1")
    elif version == "2.0":
        odds = {qid: 0.0 for qid in predictions} if null_odds is None else null_odds
        has_answer = {qid: bool(texts) for qid, texts in golds.items()}
        raw = _raw_scores(predictions, golds)
        exact, f1_scores = (_apply_null_threshold(r, odds, has_answer, null_threshold) for r in raw)
        names = ("exact", "f1")
    else:
        raise UserError(f"unknown SQuAD version {version!r}; choose one of 1.1, 2.0")
    return {names[0]: {q: 100.0 * exact[q] for q in golds},
            names[1]: {q: 100.0 * f1_scores[q] for q in golds}}
