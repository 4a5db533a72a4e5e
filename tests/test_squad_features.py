"""SQuAD windows, answer positions and span post-processing, on a WordPiece tokenizer whose vocabulary the
test makes (ELECTRA-small's uncased BERT one splits these words alike: one token a word or mark), so the
windowing is checked without ../shared."""

import datasets
import numpy as np
import pytest

from foundation.infra.errors import UserError
from tasks.squad_features import (
    postprocess,
    prepare_eval_features,
    prepare_train_features,
    truncate_questions,
)

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank. "  # 14 one-piece tokens
# With "Who won?" (3 tokens) a window holds 58 context tokens; a step of 42 makes consecutive ones share 16.
SMALL = {"max_length": 64, "doc_stride": 42, "max_query_length": 8}


# Every word and mark the tests' texts use, each one token; "1990s" is one token, as in ELECTRA's vocabulary.
VOCABULARY = ("the quick brown fox jumps over lazy dog near river bank denver broncos won game who what is "
              "name of team that in end which it rose 1990s 1990 when why . ? ,").split()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import transformers

    folder = tmp_path_factory.mktemp("squad-vocab")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *VOCABULARY]) + "\n")
    transformers.BertTokenizer(vocab=str(vocab), do_lower_case=True).save_pretrained(folder)  # v5: `vocab`
    return transformers.AutoTokenizer.from_pretrained(folder)


def _row(qid, question, context, answer, start):
    answers = {"text": [answer], "answer_start": [start]} if answer else {"text": [], "answer_start": []}
    return {"id": qid, "question": question, "context": context, "answers": answers}


def _examples(*rows):
    return datasets.Dataset.from_list([_row(*row) for row in rows])


def _long_example(answer="Denver Broncos", offset=0):
    # 10 sentences (140 tokens) then "Denver Broncos won the game ." (6 tokens): 146 context tokens.
    context = SENTENCE * 10 + "Denver Broncos won the game."
    return _examples(("long", "Who won?", context, answer, len(SENTENCE) * 10 + offset))


def _token_at(offsets, char_start):
    return next(i for i, o in enumerate(offsets) if o is not None and o[0] == char_start)


def test_truncate_questions_cuts_at_token_end(tokenizer):
    questions = ["What is the name of the team?", "Who won?"]
    assert truncate_questions(questions, tokenizer, 3) == ["What is the", "Who won?"]


def test_long_context_gives_overlapping_windows_with_answer_positions(tokenizer):
    examples = _long_example()
    assert len(tokenizer(examples[0]["context"], add_special_tokens=False)["input_ids"]) == 146
    train, num_misaligned = prepare_train_features(examples, tokenizer, **SMALL)
    evals = prepare_eval_features(examples, tokenizer, **SMALL)
    # "Who won?" is 3 tokens, so a 64-token window holds 58 context tokens and moves on by doc_stride 42
    # (sharing 16): windows start at context tokens 0, 42, 84, 126. The answer (tokens 140-141) is in the
    # last two, at 5 + 140 - 84 = 61 and 5 + 140 - 126 = 19 (5 = [CLS] + 3 question tokens + [SEP]).
    assert (len(train), len(evals), num_misaligned) == (4, 4, 0)
    assert list(train["start_positions"]) == [0, 0, 61, 19]
    assert list(train["end_positions"]) == [0, 0, 62, 20]
    assert list(evals["example_id"]) == ["long"] * 4
    offsets = [[o for o in window if o is not None] for window in evals["offset_mapping"]]
    for before, after in zip(offsets, offsets[1:], strict=False):
        assert before[-16:] == after[:16]  # consecutive windows share 58 - 42 tokens
    context = examples[0]["context"]
    for window, start, end in zip(evals["offset_mapping"][2:], [61, 19], [62, 20], strict=True):
        assert context[window[start][0] : window[end][1]] == "Denver Broncos"
    # Unpadded: the last window holds context tokens 126-145, so 5 + 20 + [SEP] = 26 tokens.
    assert [len(ids) for ids in train["input_ids"]] == [64, 64, 64, 26]


def test_answer_on_last_context_token_of_a_window(tokenizer):
    # "Broncos" is token 141, the last context token of the third window; the start search must stop
    # there and not run on into [SEP], whose (0, 0) offset also starts "before" the answer.
    train, _ = prepare_train_features(_long_example("Broncos", offset=7), tokenizer, **SMALL)
    assert list(train["start_positions"]) == [0, 0, 62, 20]
    assert list(train["end_positions"]) == [0, 0, 62, 20]


def test_eval_offsets_mask_question_and_specials(tokenizer):
    evals = prepare_eval_features(_examples(("q", "Who jumps?", SENTENCE, "fox", 16)), tokenizer, **SMALL)
    offsets = evals[0]["offset_mapping"]
    # [CLS] who jumps ? [SEP] are masked, the 14 context tokens keep offsets, the final [SEP] is masked.
    assert offsets[:5] == [None] * 5
    assert offsets[5] == [0, 3] and offsets[18] == [63, 64]
    assert offsets[19:] == [None]


def test_misaligned_answers_are_counted_once_and_kept(tokenizer):
    train, num_misaligned = prepare_train_features(_long_example("Denver Bronco"), tokenizer, **SMALL)
    assert num_misaligned == 1  # in two windows, but one answer
    assert list(train["end_positions"]) == [0, 0, 62, 20]  # the enclosing "broncos" token
    examples = _examples(
        ("decade", "When?", "It rose in the 1990s.", "1990", 15),  # "1990s" is a single token
        ("fine", "When?", "It rose in 1990.", "1990", 11),
        ("none", "Why?", "It rose in 1990.", None, None),
    )
    train, num_misaligned = prepare_train_features(examples, tokenizer, **SMALL)
    assert num_misaligned == 1
    assert list(train["start_positions"]) == [8, 7, 0]  # [CLS] when ? [SEP] it rose in the|1990s
    assert list(train["end_positions"]) == [8, 7, 0]


def test_question_is_truncated_to_max_query_length(tokenizer):
    question = "What is the name of the team that won the game in the end?"
    evals = prepare_eval_features(_examples(("q", question, SENTENCE, "fox", 16)), tokenizer, **SMALL)
    assert evals[0]["offset_mapping"][: 1 + 8 + 1] == [None] * 10
    assert evals[0]["offset_mapping"][10] == [0, 3]  # context starts right after 8 question tokens


def _window_starts(evals, context_offsets) -> list[int]:
    """The context token each window starts at."""
    token_of_char = {start: i for i, (start, _) in enumerate(context_offsets)}
    return [token_of_char[next(o for o in window if o is not None)[0]] for window in evals["offset_mapping"]]


def test_doc_stride_is_the_step_between_window_starts_for_a_1000_token_context(tokenizer):
    # ELECTRA's qa_tasks.py: start += min(length, doc_stride) until a window reaches the end. With 512-token
    # windows and a 3-token question each holds 506 context tokens: starts 0, 128, 256, 384, 512 (512 + 506
    # >= 1000). A 13-token question (496 tokens of context) in the same batch gets the same starts.
    context = SENTENCE * 71 + "Denver Broncos won the game."
    context_offsets = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert len(context_offsets) == 1000
    long_question = "Which team won the game near the river bank in the end?"
    assert len(tokenizer(long_question, add_special_tokens=False)["input_ids"]) == 13
    examples = _examples(("short", "Who won?", context, "Denver Broncos", len(SENTENCE) * 71),
                         ("long", long_question, context, "Denver Broncos", len(SENTENCE) * 71))
    evals = prepare_eval_features(examples, tokenizer, max_length=512, doc_stride=128, max_query_length=64)
    assert list(evals["example_id"]) == ["short"] * 5 + ["long"] * 5  # example order kept
    assert _window_starts(evals, context_offsets) == [0, 128, 256, 384, 512] * 2
    assert [len(ids) for ids in evals["input_ids"]] == [512] * 4 + [5 + 488 + 1] + [512] * 4 + [15 + 488 + 1]
    # 384-token windows (378 context tokens): one more window, the last from 640
    evals = prepare_eval_features(examples.select([0]), tokenizer, max_length=384, doc_stride=128,
                                  max_query_length=64)
    assert _window_starts(evals, context_offsets) == [0, 128, 256, 384, 512, 640]


def test_stride_longer_than_the_window_gives_adjacent_windows(tokenizer):
    # 58 context tokens per window, doc_stride 64: ELECTRA steps min(58, 64), so no token is skipped.
    examples = _long_example()
    evals = prepare_eval_features(examples, tokenizer, max_length=64, doc_stride=64, max_query_length=8)
    context_offsets = tokenizer(examples[0]["context"], add_special_tokens=False,
                                return_offsets_mapping=True)["offset_mapping"]
    assert _window_starts(evals, context_offsets) == [0, 58, 116]


def test_window_without_room_for_context_is_a_user_error(tokenizer):
    expected = "max_length 64 leaves no context tokens after a 61-token question"
    with pytest.raises(UserError, match=expected):
        prepare_eval_features(_long_example(), tokenizer, max_length=64, doc_stride=32, max_query_length=61)


def _short_case(tokenizer):
    examples = _examples(("q", "Who jumps?", SENTENCE, "fox", 16))
    features = prepare_eval_features(examples, tokenizer, **SMALL)
    offsets = features[0]["offset_mapping"]
    tokens = {word: _token_at(offsets, SENTENCE.index(word)) for word in ("quick", "lazy", "river", "bank")}
    start, end = np.zeros((1, 64)), np.zeros((1, 64))
    start[0, tokens["quick"]] = end[0, tokens["lazy"]] = 5.0  # 7-token span, score 10
    start[0, tokens["river"]] = end[0, tokens["bank"]] = 3.0  # 2-token span, score 6
    start[0, 2] = end[0, 2] = 100.0  # the question token "jumps" can never be an answer
    return examples, features, start, end


def test_postprocess_picks_best_span_within_max_answer_length(tokenizer):
    examples, features, start, end = _short_case(tokenizer)
    assert postprocess(examples, features, start, end) == ({"q": "quick brown fox jumps over the lazy"}, {})
    # At most 3 tokens: "river bank" (6) beats "quick"+0 or 0+"lazy" (5); quick..bank is too long.
    predictions, _ = postprocess(examples, features, start, end, max_answer_length=3)
    assert predictions == {"q": "river bank"}


def test_postprocess_v2_null_score(tokenizer):
    examples, features, start, end = _short_case(tokenizer)
    start[0, 0] = end[0, 0] = 6.0  # null score 12 beats the best span's 10: null odds 2
    assert postprocess(examples, features, start, end, version_2=True) == ({"q": ""}, {"q": 2.0})
    predictions, null_odds = postprocess(examples, features, start, end, version_2=True, null_threshold=2.5)
    assert (predictions, null_odds) == ({"q": "quick brown fox jumps over the lazy"}, {"q": 2.0})


def test_postprocess_across_windows_uses_best_span_and_lowest_null(tokenizer):
    examples = _long_example()
    features = prepare_eval_features(examples, tokenizer, **SMALL)
    start, end = np.zeros((4, 64)), np.zeros((4, 64))
    start[:, 0] = end[:, 0] = [9.0, 2.0, 7.0, 8.0]  # null scores 18, 4, 14, 16: the lowest counts
    start[3, 19], end[3, 20] = 4.0, 3.0  # "Denver Broncos" in the last window, score 7
    start[2, 61], end[2, 62] = 1.0, 1.0  # the same span seen in the third window scores lower
    # Ragged rows, as when each eval batch is padded to its own longest window.
    lengths = [len(ids) for ids in features["input_ids"]]
    start, end = (
        [row[:n] for row, n in zip(start, lengths, strict=True)],
        [row[:n] for row, n in zip(end, lengths, strict=True)],
    )
    predictions, null_odds = postprocess(examples, features, start, end, version_2=True)
    assert (predictions, null_odds) == ({"long": "Denver Broncos"}, {"long": 4.0 - 7.0})
    predictions, _ = postprocess(examples, features, start, end, version_2=True, null_threshold=-4.0)
    assert predictions == {"long": ""}


def test_postprocess_rejects_mismatched_inputs(tokenizer):
    examples, features, start, end = _short_case(tokenizer)
    with pytest.raises(ValueError, match="got 2/1 logit rows for 1 features"):
        postprocess(examples, features, np.zeros((2, 64)), end)
    other = _examples(("other", "Who?", SENTENCE, "fox", 16))
    with pytest.raises(ValueError, match="example 'other' has no features"):
        postprocess(other, features, start, end)


def test_answerability_target_is_the_examples_not_the_windows(tokenizer):
    # ELECTRA's `_is_impossible` is per example: the long example's first two windows miss the answer
    # and point at [CLS], yet are trained as answerable; an unanswerable question is 1 in every window.
    train, _ = prepare_train_features(_long_example(), tokenizer, **SMALL)
    assert list(train["start_positions"]) == [0, 0, 61, 19]
    assert list(train["is_impossible"]) == [0, 0, 0, 0]
    none = _examples(("none", "Who won?", SENTENCE * 10 + "Denver Broncos won the game.", None, None))
    train, _ = prepare_train_features(none, tokenizer, **SMALL)
    assert (list(train["start_positions"]), list(train["is_impossible"])) == ([0] * 4, [1] * 4)


def test_eval_windows_mark_starts_in_their_max_context_window(tokenizer):
    # Windows cover context tokens 0-57, 42-99, 84-141, 126-145 (step 42). A token's score in a window is
    # min(left, right) + 0.01 * length: token 49 scores min(49, 8) = 8.58 in the first, min(7, 50) = 7.58
    # in the second, so it starts answers only in the first; token 50: 7.58 vs 8.58, only in the second.
    # Tokens 91 / 92 split the second and third alike (8 vs 7, 7 vs 8). The last window is short:
    # token 133 scores min(49, 8) + 0.58 = 8.58 in the third, min(7, 12) + 0.2 = 7.2 in the fourth;
    # token 134 7.58 vs 8.2. Position in a window = 5 ([CLS], 3 question tokens, [SEP]) + token - start.
    allowed = prepare_eval_features(_long_example(), tokenizer, **SMALL)["allowed"]
    owners = {}
    for window, start in enumerate([0, 42, 84, 126]):
        for position, flag in enumerate(allowed[window]):
            if flag:
                owners.setdefault(start + position - 5, []).append(window)
    assert sorted(owners) == list(range(146))  # every context token starts answers in exactly one window
    assert all(len(windows) == 1 for windows in owners.values())
    assert [owners[t][0] for t in (49, 50, 91, 92, 133, 134)] == [0, 1, 1, 2, 2, 3]
    assert allowed[0][:5] == [False] * 5 and allowed[3][-1] is False  # [CLS], question, [SEP]s never
