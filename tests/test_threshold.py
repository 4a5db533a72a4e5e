"""A multi-label task's threshold chosen on dev (--choose-threshold): the choice worked by hand, what the
scores, the test predictions and the bundle take from it, and where it is refused or named."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tasks import metrics
from tasks.text import TextAdapter
from tasks.text_task import TextTask
from tests.conftest import run_cli


def _logits(probabilities):
    return [np.array([math.log(p / (1 - p)) for p in row]) for row in probabilities]


def test_the_best_threshold_is_the_highest_scoring_and_a_tie_goes_nearest_one_half():
    assert metrics.THRESHOLDS[0] == 0.05 and metrics.THRESHOLDS[-1] == 0.95 and len(metrics.THRESHOLDS) == 19
    assert metrics.best_threshold(lambda t: -abs(t - 0.3)) == 0.3
    assert metrics.best_threshold(lambda t: 1.0 if 0.55 < t < 0.7 else 0.0) == 0.6  # 0.60 and 0.65 tie
    assert metrics.best_threshold(lambda t: 1.0 if t in (0.4, 0.6) else 0.0) == 0.4  # equally near: lower


def test_a_dev_split_chooses_its_threshold_and_the_test_predictions_use_it():
    """Sigmoids [0.7, 0.2], [0.58, 0.7], [0.9, 0.85] against gold [1, 0], [0, 1], [1, 1]: at 0.5 the 0.58
    is a false positive, micro-F1 = 2*4 / (2*4 + 1) = 8/9; every threshold in (0.58, 0.7) is perfect, and
    of 0.60 and 0.65 the choice is 0.60, nearer 0.5."""
    task = TextTask("topics", ("text",), "labels", "multilabel", ("a", "b"), ("micro_f1", "macro_f1"),
                    "micro_f1", choose_threshold=True)
    adapter = TextAdapter(task, None, {}, {"validation": [[1, 0], [0, 1], [1, 1]]}, {})
    dev = _logits([[0.7, 0.2], [0.58, 0.7], [0.9, 0.85]])
    fixed = TextAdapter(dataclasses.replace(task, choose_threshold=False), None, {},
                        {"validation": [[1, 0], [0, 1], [1, 1]]}, {})
    assert fixed.score("validation", dev)["micro_f1"] == pytest.approx(8 / 9)
    scored = adapter.score("validation", dev)
    assert scored["threshold"] == 0.6 and scored["micro_f1"] == 1.0 and scored["score"] == 1.0
    # a test row at 0.62 is a label at the chosen 0.60 (and would be at 0.5); at 0.55 it is not
    assert adapter.named(_logits([[0.62, 0.55]])) == [["a"]]
    assert fixed.named(_logits([[0.62, 0.55]])) == [["a", "b"]]


def test_choose_threshold_on_a_single_label_task_is_one_line_before_anything_is_written(tiny_model, tmp_path,
                                                                                        capsys):
    (tmp_path / "train.csv").write_text("text,label\na,ok\nb,alert\nc,ok\n")
    code, _, err = run_cli(["run", "text", "--model", tiny_model, "--train", tmp_path / "train.csv", "--text", "text",
                            "--choose-threshold", "--output-dir", tmp_path / "out"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert "--choose-threshold chooses a multi-label task's threshold" in err and "classification" in err
    assert not (tmp_path / "out").exists()


def test_a_threshold_tuned_on_dev_is_a_named_departure_and_the_bundle_takes_the_seeds():
    from harness.deploy.text_export import Exporter
    from reports import recipe

    task = TextTask("topics", ("text",), "labels", "multilabel", ("a", "b"), ("micro_f1",), "micro_f1",
                    choose_threshold=True)
    found = recipe.departures({"data": {"task": task.record()}}, "small")
    assert recipe.describe(found) == "choose_threshold=true (threshold tuned on dev)"
    assert recipe.departures({"data": {"task": TextTask.from_record(task.record() | {
        "choose_threshold": False}).record()}}, "small") == {}
    seed = {"metrics": {"validation": {"micro_f1": 1.0, "threshold": 0.65}}}
    assert Exporter().for_seed(task, seed).threshold == 0.65
    assert Exporter().own_fields(Exporter().for_seed(task, seed))["threshold"] == 0.65
    plain = TextTask("topics", ("text",), "labels", "multilabel", ("a", "b"), ("micro_f1",), "micro_f1")
    assert Exporter().for_seed(plain, seed) is plain


def test_the_run_table_lists_each_seeds_threshold_chosen_on_dev():
    from reports import recipe

    task = TextTask("topics", ("text",), "labels", "multilabel", ("a", "b"), ("micro_f1",), "micro_f1",
                    choose_threshold=True)
    runs = [{"task": "topics", "seed": s, "metrics": {"validation": {"micro_f1": 0.5, "threshold": t}}}
            for s, t in ((0, 0.55), (1, 0.5))]
    note = recipe.threshold_note({"data": {"task": task.record()}, "runs": runs})
    assert note.endswith("topics seed 0: 0.55, topics seed 1: 0.50") and "a departure" in note
    assert recipe.threshold_note({"data": {"task": dataclasses.replace(task, choose_threshold=False).record()},
                                  "runs": runs}) is None
