"""SQuAD metrics against values worked by hand from the official evaluate-v1.1.py / evaluate-v2.0.py rules."""

import pytest

from foundation.infra.errors import UserError
from tasks.squad_metrics import (
    exact_match,
    f1,
    normalize_answer,
    question_scores,
    squad_scores,
    squad_v1_scores,
    squad_v2_scores,
)


def _example(qid, *golds):
    return {"id": qid, "answers": {"text": list(golds), "answer_start": [0] * len(golds)}}


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The  Quick, brown-fox!", "quick brownfox"),  # punctuation dropped inside words, not split on
        ("An apple a day", "apple day"),
        ("theatre", "theatre"),  # articles only as whole words
        ("?!...", ""),
    ],
)
def test_normalize_answer(text, normalised):
    assert normalize_answer(text) == normalised


def test_exact_match_ignores_case_punctuation_and_articles():
    assert exact_match("An apple.", "apple") == 1
    assert exact_match("apples", "apple") == 0
    assert exact_match("...", "") == 1


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        # pred tokens [denver, broncos], gold [denver, broncos, team]: P=1, R=2/3, F1=2*(2/3)/(5/3)=0.8
        ("Denver Broncos", "the Denver Broncos team", 0.8),
        # articles go, pred [cat, cat] vs gold [cat]: overlap min(2,1)=1, P=1/2, R=1, F1=2/3
        ("the the cat cat", "cat", 2 / 3),
        # overlap is clipped by the gold count: P=1/3, R=1, F1=0.5 (counting every pred token gives 1.0)
        ("cat cat cat", "cat", 0.5),
        # [cat, cat, dog] vs [cat, dog, dog]: overlap cat 1 + dog 1 = 2, P=R=2/3
        ("cat cat dog", "cat dog dog", 2 / 3),
        ("Paris", "London", 0.0),
        # v2.0 rule: if either side has no tokens, F1 is 1 only when both are empty
        ("", "", 1.0),
        ("!!!", "the", 1.0),
        ("cat", "", 0.0),
        ("", "cat", 0.0),
    ],
)
def test_f1_worked_values(prediction, gold, expected):
    assert f1(prediction, gold) == pytest.approx(expected)


def test_v1_scores_take_max_over_golds_and_keep_v1_empty_rule():
    examples = [
        _example("q1", "Denver Broncos", "The Broncos"),  # pred matches the second gold exactly
        _example("q2", "Saint Bernadette Soubirous"),  # P=1, R=1/3 -> F1=0.5, EM 0
        _example("q3", "the"),  # gold normalises to "": EM 1 with "", but v1.1's F1 gives 0
    ]
    predictions = {"q1": "Broncos", "q2": "Bernadette", "q3": ""}
    scores = squad_v1_scores(predictions, examples)
    assert scores == pytest.approx({"exact_match": 100 * 2 / 3, "f1": 100 * 1.5 / 3})


def test_question_scores_average_to_the_official_scores():
    # The per-question scores intervals resample: their means are EM/F1, for both versions.
    examples = [_example("q1", "Denver Broncos", "The Broncos"), _example("q2", "Saint Bernadette Soubirous"),
                _example("q3", "the")]
    found = question_scores("1.1", {"q1": "Broncos", "q2": "Bernadette", "q3": ""}, examples)
    assert found == {"exact_match": {"q1": 100.0, "q2": 0.0, "q3": 100.0}, "f1": {"q1": 100.0, "q2": 50.0, "q3": 0.0}}
    predictions, examples, null_odds = _v2_case()
    for threshold in (1.0, 0.5):
        found = question_scores("2.0", predictions, examples, null_odds, threshold)
        official = squad_v2_scores(predictions, examples, null_odds, threshold=threshold)
        assert sum(found["exact"].values()) / 5 == pytest.approx(official["exact"])
        assert sum(found["f1"].values()) / 5 == pytest.approx(official["f1"])


def test_v1_scores_reject_missing_prediction():
    with pytest.raises(UserError, match=r"1 of 2 questions have no prediction \(first: 'q2'\)"):
        squad_v1_scores({"q1": "x"}, [_example("q1", "x"), _example("q2", "y")])


def _v2_case():
    examples = [
        _example("a", "Paris"),
        _example("b", "Red Sea coast"),
        _example("c"),
        _example("d"),
        _example("e", "1990"),
    ]
    predictions = {"a": "Paris", "b": "Red Sea", "c": "London", "d": "", "e": "1991"}
    null_odds = {"a": 0.1, "b": 0.6, "c": 0.8, "d": 0.3, "e": 0.9}
    return predictions, examples, null_odds


def test_v2_scores_worked_by_hand():
    # raw (exact, f1): a (1, 1), b (0, 0.8), c (0, 0) answered though unanswerable, d (1, 1), e (0, 0).
    # best_f1: start at 2 (both no-answers right), sweep odds ascending:
    #   a +1 -> 3 (thresh 0.1), d +0, b +0.8 -> 3.8 (thresh 0.6), c -1 -> 2.8, e +0 -> 2.8; 3.8/5 = 76%.
    # best_exact: a +1 -> 3 (thresh 0.1), then d, b add 0 and c subtracts 1; 3/5 = 60%.
    predictions, examples, null_odds = _v2_case()
    scores = squad_v2_scores(predictions, examples, null_odds)
    expected = {
        "exact": 40.0, "f1": 56.0, "total": 5,
        "HasAns_exact": 100 / 3, "HasAns_f1": 60.0, "HasAns_total": 3,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
        "best_exact": 60.0, "best_exact_thresh": 0.1,
        "best_f1": 76.0, "best_f1_thresh": 0.6,
    }  # fmt: skip
    assert scores == pytest.approx(expected)


def test_v2_threshold_turns_high_null_odds_into_no_answer():
    # Odds above 0.5 (b, c, e) count as "": b and e lose, c becomes right. Final a1 b0 c1 d1 e0.
    predictions, examples, null_odds = _v2_case()
    scores = squad_v2_scores(predictions, examples, null_odds, threshold=0.5)
    assert scores["exact"] == pytest.approx(60.0)
    assert scores["f1"] == pytest.approx(60.0)
    assert scores["HasAns_f1"] == pytest.approx(100 / 3)
    assert scores["NoAns_exact"] == pytest.approx(100.0)


def test_v2_without_null_odds_has_no_best_keys_and_no_empty_breakdown():
    examples = [_example("a", "Paris"), _example("b", "?")]  # "?" normalises to "", so b's gold is [""]
    scores = squad_v2_scores({"a": "the Paris", "b": ""}, examples)
    assert scores == {
        "exact": 100.0, "f1": 100.0, "total": 2,
        "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 2,
    }  # fmt: skip


def test_v2_rejects_missing_null_odds():
    predictions, examples, null_odds = _v2_case()
    del null_odds["c"]
    with pytest.raises(UserError, match=r"no null odds \(first: 'c'\)"):
        squad_v2_scores(predictions, examples, null_odds)


def test_squad_scores_dispatches_on_version_and_adds_score():
    examples = [_example("q1", "Saint Bernadette Soubirous")]  # P=1, R=1/3: F1 0.5, EM 0
    assert squad_scores("1.1", {"q1": "Bernadette"}, examples) == pytest.approx(
        {"exact_match": 0.0, "f1": 50.0, "score": 50.0})
    predictions, examples, null_odds = _v2_case()
    scores = squad_scores("2.0", predictions, examples, null_odds, null_threshold=0.5)
    assert (scores["exact"], scores["f1"], scores["score"]) == pytest.approx((60.0, 60.0, 60.0))
    with pytest.raises(UserError, match="unknown SQuAD version '2'; choose one of 1.1, 2.0"):
        squad_scores("2", predictions, examples)
