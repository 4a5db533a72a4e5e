"""SQuAD answer search and question truncation (tasks/squad_spans.py), against values worked by hand.

This one function picks answers both at fine-tuning (tasks/squad_features.postprocess) and in the
torch-free ONNX predictor, so these numbers pin both.
"""

import numpy as np
import pytest

from tasks.squad_spans import best_answer, truncate_question

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
