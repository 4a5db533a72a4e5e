"""The harness's `evaluate` modules give exactly the pure functions' numbers, loaded offline by path."""

import math

import evaluate
import pytest

from foundation.infra.errors import UserError
from tasks import evaluate_metrics, metrics, squad_metrics
from tasks.evaluate_metrics import GLUE_METRIC, SQUAD_METRIC
from tasks.registry import GLUE_TASKS, SQUAD_TASKS


@pytest.mark.parametrize(("task", "predictions", "references", "expected"), [
    # gold 1,1,1,0 and predictions 1,0,0,0: precision 1, recall 1/3, F1 0.5; accuracy 2/4
    ("mrpc", [1, 0, 0, 0], [1, 1, 1, 0], {"f1": 0.5, "accuracy": 0.5, "score": 0.5}),
    # TP=2 FP=1 TN=1 FN=0: MCC (2*1 - 1*0) / sqrt(3*2*2*1)
    ("cola", [1, 1, 1, 0], [1, 1, 0, 0], {"mcc": 2 / math.sqrt(12), "score": 2 / math.sqrt(12)}),
    # Pearson: deviations -1,0,1 vs -4/3,-1/3,5/3, r = 3 / sqrt(2 * 42/9); Spearman 1 (same order)
    ("stsb", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0], {"pearson": 3 / math.sqrt(2 * 42 / 9), "spearman": 1.0,
                                                "score": (3 / math.sqrt(2 * 42 / 9) + 1.0) / 2}),
    # deviations -0.1,0,0.1 vs 1,-1,0: Pearson -0.1 / sqrt(0.02 * 2) = -0.5; rank differences -2,1,1:
    # Spearman 1 - 6*6 / (3*(9-1)) = -0.5. Scores that are not binary fractions must survive the round trip.
    ("stsb", [0.1, 0.2, 0.3], [3.0, 1.0, 2.0], {"pearson": -0.5, "spearman": -0.5, "score": -0.5}),
])
def test_glue_module_matches_the_pure_metrics(task, predictions, references, expected):
    module = evaluate.load(str(GLUE_METRIC), task)
    scores = module.compute(predictions=predictions, references=references)
    pure = metrics.compute(GLUE_TASKS[task].metrics, predictions, references)
    assert scores == pure  # exactly: the module only wraps tasks.metrics
    assert evaluate_metrics.glue_scores(GLUE_TASKS[task], predictions, references) == pure
    assert {name: scores[name] for name in expected} == pytest.approx(expected)


def test_glue_module_rejects_an_unknown_task():
    with pytest.raises(KeyError, match="unknown GLUE task 'sst'; choose one of cola, sst2, mrpc"):
        evaluate.load(str(GLUE_METRIC), "sst")


def _example(qid, *golds):
    return {"id": qid, "answers": {"text": list(golds), "answer_start": [0] * len(golds)}}


V1_EXAMPLES = [_example("q1", "Denver Broncos", "The Broncos"), _example("q2", "Saint Bernadette Soubirous"),
               _example("q3", "the")]
V2_EXAMPLES = [_example("a", "Paris"), _example("b", "Red Sea coast"), _example("c"), _example("d"),
               _example("e", "1990")]
V2_PREDICTIONS = {"a": "Paris", "b": "Red Sea", "c": "London", "d": "", "e": "1991"}
V2_NULL_ODDS = {"a": 0.1, "b": 0.6, "c": 0.8, "d": 0.3, "e": 0.9}


def test_squad_module_matches_the_pure_scores_v1():
    predictions = {"q1": "Broncos", "q2": "Bernadette", "q3": ""}
    module = evaluate.load(str(SQUAD_METRIC), "squad")
    scores = module.compute(predictions=[{"id": k, "prediction_text": v} for k, v in predictions.items()],
                            references=V1_EXAMPLES)
    # q1 exact, q2 F1 0.5, q3's gold normalises to "": EM 1 but v1.1's F1 0
    assert scores == pytest.approx({"exact_match": 100 * 2 / 3, "f1": 100 * 1.5 / 3, "score": 50.0})
    assert scores == squad_metrics.squad_scores("1.1", predictions, V1_EXAMPLES)
    assert evaluate_metrics.squad_scores(SQUAD_TASKS["1.1"], predictions, V1_EXAMPLES) == scores


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_squad_module_matches_the_pure_scores_v2(threshold):
    rows = [{"id": qid, "prediction_text": text, "no_answer_probability": V2_NULL_ODDS[qid]}
            for qid, text in V2_PREDICTIONS.items()]
    module = evaluate.load(str(SQUAD_METRIC), "squad_v2")
    scores = module.compute(predictions=rows, references=V2_EXAMPLES, null_threshold=threshold)
    pure = squad_metrics.squad_v2_scores(V2_PREDICTIONS, V2_EXAMPLES, V2_NULL_ODDS, threshold=threshold)
    assert scores == pure | {"score": pure["f1"]}
    harness = evaluate_metrics.squad_scores(SQUAD_TASKS["2.0"], V2_PREDICTIONS, V2_EXAMPLES, V2_NULL_ODDS,
                                            threshold)
    assert harness == scores
    # Worked in tests/test_squad_metrics.py: every odds is above 0, so all count as "no answer" at
    # threshold 0 (c, d right: 40%); at 0.5, a and d keep their answers and c becomes right (60%).
    assert (scores["exact"], scores["best_f1"], scores["best_f1_thresh"]) == pytest.approx(
        (40.0 if threshold == 0.0 else 60.0, 76.0, 0.6))


def test_squad_scoring_names_missing_predictions():
    with pytest.raises(UserError, match=r"1 of 5 questions have no null odds \(first: 'c'\)"):
        evaluate_metrics.squad_scores(SQUAD_TASKS["2.0"], V2_PREDICTIONS, V2_EXAMPLES,
                                      {k: v for k, v in V2_NULL_ODDS.items() if k != "c"})
    with pytest.raises(UserError, match=r"1 of 3 questions have no prediction \(first: 'q3'\)"):
        evaluate_metrics.squad_scores(SQUAD_TASKS["1.1"], {"q1": "x", "q2": "y"}, V1_EXAMPLES)
