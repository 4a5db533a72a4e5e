"""GLUE metrics against values worked by hand."""

import math

import pytest

from tasks import metrics


def test_accuracy():
    assert metrics.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5


def test_f1_counts_only_true_positives_as_hits():
    # gold 1,1,1,0 and predictions 1,0,0,0: precision 1, recall 1/3, F1 = 2*(1*1/3)/(1+1/3) = 0.5
    assert metrics.f1([1, 0, 0, 0], [1, 1, 1, 0]) == pytest.approx(0.5)


def test_mcc_worked():
    # TP=2 FP=1 TN=1 FN=0: (2*1 - 1*0) / sqrt(3*2*2*1) = 2/sqrt(12)
    assert metrics.mcc([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(2 / math.sqrt(12))
    assert metrics.mcc([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0  # constant predictions


def test_pearson_worked():
    # deviations p: -1,0,1; r: -4/3,-1/3,5/3; cov 3; r = 3 / sqrt(2 * 42/9)
    assert metrics.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(2 * 42 / 9))


def test_spearman_worked():
    # rank differences -2, 1, 1: rho = 1 - 6*6 / (3*(9-1)) = -0.5
    assert metrics.spearman([1, 2, 3], [3, 1, 2]) == pytest.approx(-0.5)


def test_constant_prediction_has_zero_correlation():
    assert metrics.pearson([2.0, 2.0, 2.0], [1, 2, 3]) == 0.0
    assert metrics.spearman([2.0, 2.0, 2.0], [1, 2, 3]) == 0.0


def test_task_score_is_mean_of_metrics():
    values = metrics.compute(("f1", "accuracy"), [1, 0, 0, 0], [1, 1, 1, 0])
    assert values == pytest.approx({"f1": 0.5, "accuracy": 0.5, "score": 0.5})
    values = metrics.compute(("pearson", "spearman"), [1, 2, 3], [3, 1, 2])
    assert values["score"] == pytest.approx((values["pearson"] + -0.5) / 2)
    assert values["pearson"] == pytest.approx(-0.5)  # deviations -1,0,1 vs 1,-1,0: cov -1 / sqrt(2*2)


def test_glue_score_and_seed_summary():
    assert metrics.glue_score({"rte": 0.6, "mrpc": 0.8}) == pytest.approx(0.7)
    summary = metrics.summarize([0.1, 0.5, 0.3])
    assert summary == pytest.approx({"median": 0.3, "mean": 0.3, "std": math.sqrt(0.08 / 3), "best": 0.5, "n": 3})
