"""SQuAD answer search and question truncation (tasks/squad_spans.py), against values worked by hand.

This one function picks answers both at fine-tuning (tasks/squad_features.postprocess) and in the
torch-free ONNX predictor, so these numbers pin both.
"""

import numpy as np
import pytest

from tasks.squad_spans import best_answer, max_context, start_allowed, truncate_question

CONTEXT = "Denver Broncos won the game."
# [CLS] who [SEP] denver broncos won the game . [SEP]: only the context tokens 3-8 may answer.
OFFSETS = [None, None, None, (0, 6), (7, 14), (15, 18), (19, 22), (23, 27), (27, 28), None]


def _logits(**values):
    row = np.zeros(len(OFFSETS))
    for position, value in values.items():
        row[int(position[1:])] = value
    return row


# Start logits favour the question token 1 (never allowed), then "denver"; end logits "game", then "broncos".
START = _logits(t0=1.0, t1=9.0, t3=4.0, t4=2.0)
END = _logits(t0=1.0, t3=1.0, t4=3.0, t7=5.0)


@pytest.mark.parametrize(("question", "offsets", "limit", "expected"), [
    ("What is the name", [(0, 4), (5, 7), (8, 11), (12, 16)], 3, "What is the"),
    ("What is the name", [(0, 4), (5, 7), (8, 11), (12, 16)], 4, "What is the name"),
    ("Who won?", [(0, 3), (4, 7), (7, 8)], 2, "Who won"),  # cut at the token's end, not a space
])
def test_truncate_question_cuts_after_the_last_kept_token(question, offsets, limit, expected):
    assert truncate_question(question, offsets, limit) == expected


def test_best_span_is_the_highest_allowed_start_plus_end():
    # denver (4) + game (5) = 9 beats denver + broncos (4 + 3 = 7); the question token's 9 is not allowed.
    assert best_answer(CONTEXT, [START], [END], [OFFSETS]) == {
        "answer": "Denver Broncos won the game", "start": 0, "end": 27, "score": 9.0}


def test_max_answer_length_and_n_best_limit_the_candidates():
    # At most 2 tokens: denver..broncos (7) beats broncos..broncos (2 + 3 = 5).
    short = best_answer(CONTEXT, [START], [END], [OFFSETS], max_answer_length=2)
    assert (short["answer"], short["score"]) == ("Denver Broncos", 7.0)
    # n_best 1 keeps only the question token as a start: no allowed span, an empty answer scored 0.
    assert best_answer(CONTEXT, [START], [END], [OFFSETS], n_best=1) == {
        "answer": "", "start": 0, "end": 0, "score": 0.0}


def test_logits_past_the_offsets_are_ignored():
    # Batch padding: a 12-long row whose padding positions hold the largest logits.
    start, end = np.append(START, [50.0, 50.0]), np.append(END, [50.0, 50.0])
    assert best_answer(CONTEXT, [start], [end], [OFFSETS])["score"] == 9.0


def test_best_span_over_windows_and_lowest_null_score():
    # Window 2 sees only "won the game ." and scores won (3) + game (5) = 8 < 9; its [CLS] scores 0.5.
    second_offsets = [None, None, None, None, None, (15, 18), (19, 22), (23, 27), (27, 28), None]
    second_start, second_end = _logits(t0=0.25, t5=3.0), _logits(t0=0.25, t7=5.0)
    answer = best_answer(CONTEXT, [START, second_start], [END, second_end], [OFFSETS, second_offsets],
                         version_2=True)
    # null odds: the lowest [CLS] score, min(1 + 1, 0.25 + 0.25) = 0.5, minus the best span's 9.
    assert answer == {"answer": "Denver Broncos won the game", "start": 0, "end": 27, "score": 9.0,
                      "null_odds": -8.5}
    # Raising window 2's span to 9 ties: the earlier window's span stays.
    second_start[5] = 4.0
    tied = best_answer(CONTEXT, [START, second_start], [END, second_end], [OFFSETS, second_offsets])
    assert (tied["answer"], tied["score"]) == ("Denver Broncos won the game", 9.0)


def test_null_odds_above_the_threshold_blank_the_answer():
    answer = best_answer(CONTEXT, [START], [END], [OFFSETS], version_2=True, null_threshold=-8.0)
    assert answer == {"answer": "", "start": None, "end": None, "score": 9.0, "null_odds": -7.0}
    # With an answerability classifier, the null odds are its lowest logit over the windows.
    answer = best_answer(CONTEXT, [START, START], [END, END], [OFFSETS, OFFSETS], version_2=True,
                         null_logits=[np.float32(0.5), np.float32(-1.5)], null_threshold=-2.0)
    assert (answer["answer"], answer["null_odds"]) == ("", -1.5)


def test_mismatched_windows_are_rejected():
    with pytest.raises(ValueError, match="got 2/1 logit rows for 1 windows"):
        best_answer(CONTEXT, [START, START], [END], [OFFSETS])
    with pytest.raises(ValueError, match="no windows to search"):
        best_answer(CONTEXT, [], [], [])


def test_context_offsets_blank_everything_but_the_context():
    from tasks.squad_spans import context_offsets

    # [CLS] who ? [SEP] paris [SEP]: sequence ids None, 0, 0, None, 1, None
    offsets = [(0, 0), (0, 3), (4, 5), (0, 0), (0, 5), (0, 0)]
    assert context_offsets(offsets, [None, 0, 0, None, 1, None]) == [None, None, None, None, (0, 5), None]


def test_max_context_is_electras_example():
    # qa_tasks.py's `_check_is_max_context` comment: "the man went to the store and bought a gallon of
    # milk" in spans of 5 with a step of 3 (A 0-4, B 3-7, C 6-10, D 9-11). "bought" (token 7) scores
    # min(4, 0) + 0.05 in B and min(1, 3) + 0.05 in C: C is its max-context span, B is not.
    spans = max_context([5, 5, 5, 3], step=3)
    assert (spans[1][7 - 3], spans[2][7 - 6]) == (False, True)


def test_max_context_worked_windows_with_ties_and_the_length_bonus():
    # Windows cover 0-4, 2-6, 4-6 (lengths 5, 5, 3; step 2). Token 3: min(3, 1) + 0.05 in the first and
    # min(1, 3) + 0.05 in the second, a tie that the first window wins. Token 4: 0.05, 2.05, 0.03.
    # Token 5: min(3, 1) + 0.05 = 1.05 in the second beats min(1, 1) + 0.03 = 1.03 in the short third.
    # Token 6: 0.05 vs 0.03. The third window owns nothing.
    assert max_context([5, 5, 3], step=2) == [[True, True, True, True, False],
                                              [False, False, True, True, True],
                                              [False, False, False]]
    assert max_context([4], step=128) == [[True] * 4]  # one window owns all its tokens


def test_start_allowed_spreads_max_context_over_the_window_positions():
    # Two windows of [CLS] q [SEP] c c c [SEP], context tokens 0-2 and 1-3 (step 1): token 1 scores
    # min(1, 1) + 0.03 in the first and 0.03 in the second; token 2: 0.03 vs min(1, 1) + 0.03.
    first = [None, None, None, (0, 1), (2, 3), (4, 5), None]
    second = [None, None, None, (2, 3), (4, 5), (6, 7), None]
    assert start_allowed([first, second], step=1) == [
        [False, False, False, True, True, False, False], [False, False, False, False, True, True, False]]


def test_a_start_outside_its_max_context_window_is_not_taken():
    # "Denver" (token 3) starts the best span, 9; when this window is not its max-context one the next
    # best start is "broncos" (token 4): broncos..game = 2 + 5 = 7.
    allowed = [[o is not None and i != 3 for i, o in enumerate(OFFSETS)]]
    answer = best_answer(CONTEXT, [START], [END], [OFFSETS], allowed=allowed)
    assert (answer["answer"], answer["score"]) == ("Broncos won the game", 7.0)


JOINT = {"start_top_log_probs": np.array([-0.5, -1.0, -2.0]), "start_top_index": np.array([1, 3, 4]),
         "end_top_log_probs": np.array([[-0.1, -0.2, -3.0], [-0.3, -0.9, -1.0], [-0.2, -0.4, -0.5]]),
         "end_top_index": np.array([[2, 7, 4], [4, 7, 2], [7, 3, 12]])}


def test_joint_prediction_scores_the_beams_by_log_probability():
    # qa_metrics.py with joint_prediction: start i with its own ends j, scored start_top_log_probs[i] +
    # end_top_log_probs[i, j]. Start 1 is a question token; from "denver" (3): broncos (4) -1.3, game (7)
    # -1.9, and end 2 lies before the start; from "broncos" (4): game -2.2, end 3 before it, 12 past the end.
    answer = best_answer(CONTEXT, [START], [None], [OFFSETS], joint=[JOINT])
    assert answer == {"answer": "Denver Broncos", "start": 0, "end": 14, "score": pytest.approx(-1.3)}
    # Joint without the classifier: the null score is the start logit at [CLS] (ELECTRA's end logits are
    # zeros there): 1.0 - (-1.3).
    answer = best_answer(CONTEXT, [START], [None], [OFFSETS], joint=[JOINT], version_2=True)
    assert answer["null_odds"] == pytest.approx(2.3)
    # Only the max-context rule keeps "denver" out: broncos..game wins, -2.2.
    allowed = [[o is not None and i != 3 for i, o in enumerate(OFFSETS)]]
    answer = best_answer(CONTEXT, [START], [None], [OFFSETS], joint=[JOINT], allowed=allowed)
    assert (answer["answer"], answer["score"]) == ("Broncos won the game", pytest.approx(-2.2))
