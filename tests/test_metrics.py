"""GLUE metrics against values worked by hand."""

import math

import numpy as np
import pytest

from tasks import metrics
from tasks.registry import GLUE_CONVENTION, GLUE_TASKS


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


def test_glue_average_follows_the_paper_convention():
    # A hand-made run: MRPC's paper metric is accuracy (not its F1/accuracy mean), STS-B's Spearman,
    # MNLI's the matched accuracy; WNLI is run but left out of the average.
    split_metrics = {
        "mrpc": {"validation": {"f1": 0.9, "accuracy": 0.7, "score": 0.8}},
        "stsb": {"validation": {"pearson": 0.5, "spearman": 0.4, "score": 0.45}},
        "mnli": {"validation_matched": {"accuracy": 0.6, "score": 0.6},
                 "validation_mismatched": {"accuracy": 0.8, "score": 0.8}},
        "wnli": {"validation": {"accuracy": 0.1, "score": 0.1}}}
    values = {task: metrics.paper_value(task, found) for task, found in split_metrics.items()}
    assert values == {"mrpc": 0.7, "stsb": 0.4, "mnli": 0.6, "wnli": 0.1}
    assert metrics.glue_average(values) == pytest.approx((0.7 + 0.4 + 0.6) / 3)
    assert math.isnan(metrics.glue_average({"wnli": 0.5}))
    assert GLUE_CONVENTION == ("paper convention: CoLA mcc, SST-2 accuracy, MRPC accuracy, STS-B spearman, "
                               "QQP accuracy, MNLI-m accuracy, QNLI accuracy, RTE accuracy; WNLI excluded")
    assert GLUE_TASKS["mnli"].paper_label == "validation_matched_accuracy"


def test_seed_summary():
    summary = metrics.summarize([0.1, 0.5, 0.3])
    assert summary == pytest.approx({"median": 0.3, "mean": 0.3, "std": math.sqrt(0.08 / 3), "best": 0.5, "n": 3})


@pytest.mark.filterwarnings("ignore:A single label was found")
def test_batched_metrics_equal_the_scalar_ones():
    # Random label vectors, constant ones included (the zero-division rules), many at once.
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, classes = int(rng.integers(2, 30)), int(rng.integers(1, 4))
        p, r = rng.integers(0, classes, n), rng.integers(0, classes, n)
        names = ("accuracy", "mcc") + (("f1",) if classes <= 2 else ())
        for name in names:
            assert metrics.BATCHED[name](p[None], r)[0] == pytest.approx(metrics.METRICS[name](p, r), abs=1e-12)
        x, y = rng.integers(0, 4, n).astype(float), rng.normal(size=n)  # ties in x; sometimes constant
        for name in ("pearson", "spearman"):
            assert metrics.BATCHED[name](x[None], y)[0] == pytest.approx(metrics.METRICS[name](x, y), abs=1e-9)


def test_batched_metrics_score_each_row():
    predictions = np.array([[1, 0, 0, 0], [1, 1, 1, 0]])
    assert metrics.batched_f1(predictions, np.array([1, 1, 1, 0])) == pytest.approx([0.5, 1.0])
    assert metrics.batched_mcc(np.array([[1, 1, 1, 0], [1, 1, 1, 1]]), np.array([1, 1, 0, 0])) == \
        pytest.approx([2 / math.sqrt(12), 0.0])
