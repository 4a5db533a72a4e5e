"""Class weights (`class_weights=none|balanced|LABEL=W,...`): the weights worked by hand, the weighted loss
against the head's own, the refusals, and a 95/5 file where balanced weights beat the majority class."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from foundation.infra.errors import UserError
from tests.conftest import glue_args, run_cli


def test_balanced_weights_of_19_a_and_1_b_are_scikit_learns():
    from tasks.class_weights import weights_for

    assert weights_for("balanced", ("a", "b"), [0] * 19 + [1], False) == pytest.approx((20 / 38, 20 / 2))
    assert weights_for("none", ("a", "b"), [0, 1], False) is None
    # multi-label: each label's negatives / positives; a label every row has keeps 1
    rows = [[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 1.0]]
    assert weights_for("balanced", ("x", "y", "z"), rows, True) == pytest.approx((3.0, 1.0, 3.0))


def test_explicit_weights_by_label_name_and_their_one_line_refusals():
    from harness.config import load_config
    from tasks.class_weights import weights_for
    from tasks.config import FinetuneConfig

    assert weights_for("b=19", ("a", "b"), [0, 1], False) == (1.0, 19.0)  # an unlisted label weighs 1
    with pytest.raises(UserError, match=r"^class_weights names label 'c', which the training data does not "
                                        r"have; its labels are a, b$"):
        weights_for("a=1,c=2", ("a", "b"), [0, 1], False)
    with pytest.raises(UserError, match=r"class_weights weight '-2' of label 'b' is not a positive number"):
        load_config(FinetuneConfig, None, ["class_weights=a=1,b=-2"])
    with pytest.raises(UserError, match=r"class_weights item 'b' is not LABEL=WEIGHT; pass none, balanced"):
        load_config(FinetuneConfig, None, ["class_weights=a=1,b"])
    with pytest.raises(UserError, match=r"label 'b' has no training row"):
        weights_for("balanced", ("a", "b"), [0, 0], False)


def test_the_weighted_loss_is_the_heads_own_with_unit_weights_and_scales_each_class():
    import torch

    from tasks.text import weighted_loss

    logits, labels = torch.tensor([[2.0, -1.0], [0.5, 0.3], [-1.0, 1.0]]), torch.tensor([0, 1, 1])
    each = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    assert weighted_loss(logits, labels, (1.0, 1.0), False) == pytest.approx(float(each.mean()))
    assert weighted_loss(logits, labels, (2.0, 0.5), False) == pytest.approx(
        float((2 * each[0] + 0.5 * each[1] + 0.5 * each[2]) / 3))
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert weighted_loss(logits, targets, (1.0, 1.0), True) == pytest.approx(
        float(torch.nn.BCEWithLogitsLoss()(logits, targets)))  # transformers' multi-label loss
    assert weighted_loss(logits, targets, (3.0, 1.0), True) == pytest.approx(
        float(torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0, 1.0]))(logits, targets)))


def test_a_task_without_class_weights_refuses_the_setting():
    from types import SimpleNamespace

    from tasks.config import FinetuneConfig
    from tasks.finetune import _class_weighted

    glue_like = SimpleNamespace()  # GLUE, SQuAD and tagging adapters have no class weights
    assert _class_weighted(glue_like, FinetuneConfig()) is None
    with pytest.raises(UserError, match=r"class_weights=balanced weighs the loss of your own text's "
                                        r"classification and multi-label tasks \(harness run text\) only"):
        _class_weighted(glue_like, FinetuneConfig(class_weights="balanced"))


def test_class_weights_is_a_recipe_departure():
    from harness.config import as_dict
    from reports import recipe
    from tasks.config import FinetuneConfig

    assert recipe.departures({"config": as_dict(FinetuneConfig())}, "small") == {}
    found = recipe.departures({"config": as_dict(FinetuneConfig(class_weights="balanced"))}, "small")
    assert recipe.describe(found) == "class_weights=balanced"


def _rows(majority: int, minority: int, seed: int) -> list[tuple[str, str]]:
    """Sentences labelled `alert` exactly where they say "sad": a keyword the tiny model can learn."""
    rng = random.Random(seed)
    subjects = ["the film", "he", "she", "a dog", "the cat", "they"]
    rows = [(f"{rng.choice(subjects)} was very {rng.choice(['happy', 'good', 'big', 'red'])} .", "ok")
            for _ in range(majority)]
    rows += [(f"{rng.choice(subjects)} was very sad .", "alert") for _ in range(minority)]
    rng.shuffle(rows)
    return rows


@pytest.mark.slow  # a CLI run of 104 steps on the tiny model: ~15 s
def test_balanced_weights_lift_macro_f1_above_the_majority_class_on_a_95_5_file(model128, tmp_path, capsys):
    from reports import leaderboard
    from tasks import metrics

    files = {}
    for split, (majority, minority, seed) in {"train": (190, 10, 1), "dev": (30, 10, 2)}.items():
        files[split] = tmp_path / f"{split}.csv"
        files[split].write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in
                                                          _rows(majority, minority, seed)))
    out = tmp_path / "out"
    code, _, err = run_cli(["run", "text", "--model", model128, "--train", files["train"], "--dev",
                            files["dev"], "--text", "text", "--label", "label", "--output-dir", out,
                            "--tracking-uri", f"sqlite:///{tmp_path / 'ml.db'}", "precision=fp32",
                            "num_epochs=8", "batch_size=16", "learning_rate=1e-3", "layerwise_lr_decay=1",
                            "class_weights=balanced"], capsys)
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["class_weights"] == "balanced"
    assert results["class_weights"] == {"train": pytest.approx({"alert": 200 / 20, "ok": 200 / 380})}
    gold = [y for _, y in _rows(30, 10, 2)]
    majority = metrics.macro_f1(["ok"] * len(gold), gold)  # 0.43: every row called the majority class
    assert results["runs"][0]["metrics"]["validation"]["macro_f1"] > majority + 0.2
    row = leaderboard.measured_row(Path(out / "results.json"), results)
    assert "class_weights=balanced" in row.recipe and row.recipe.startswith(leaderboard.DEPARTS)


def test_a_glue_run_with_class_weights_is_refused_before_anything_is_written(tiny_model, session_glue_data,
                                                                             tmp_path, capsys):
    """GLUE's loss takes no weights: one line and exit 2, before the model loads or results.json exists."""
    code, _, err = run_cli(glue_args(tiny_model, session_glue_data, tmp_path, "class_weights=balanced"), capsys)
    assert code == 2
    assert "class_weights=balanced weighs the loss of your own text's" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists() and not list(tmp_path.rglob("results.json"))


def test_a_task_files_class_weights_are_used_unless_the_setting_names_others(tmp_path):
    """The weights a task file states become the run's class_weights setting (so results.json, tables and
    cards name them); class_weights given as a setting wins."""
    from harness.config import load_config
    from harness.finetuning.kind_runner import Job
    from harness.finetuning.text_finetuning import with_task_weights
    from tasks.config import FinetuneConfig
    from tasks.text_task import TextDescription

    task_file = tmp_path / "task.toml"
    task_file.write_text('train = "train.csv"\ntext = ["text"]\nclass_weights = "alert=10,ok=0.5"\n')
    described = load_config(TextDescription, str(task_file), [])
    job = Job(model="m", description=described, settings=(FinetuneConfig(),))
    assert with_task_weights(job).config.class_weights == "alert=10,ok=0.5"
    given = Job(model="m", description=described, settings=(FinetuneConfig(class_weights="balanced"),))
    assert with_task_weights(given).config.class_weights == "balanced"
    plain = Job(model="m", description=TextDescription(train="t.csv"), settings=(FinetuneConfig(),))
    assert with_task_weights(plain) is plain


def test_a_task_files_bad_class_weights_are_one_line_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "train.csv").write_text("text,label\na,ok\nb,alert\n")
    task_file = tmp_path / "task.toml"
    task_file.write_text('train = "train.csv"\ntext = ["text"]\nclass_weights = "ok=-1"\n')
    code, _, err = run_cli(["run", "text", "--model", "m", "--task-file", task_file, "--output-dir",
                            tmp_path / "out"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert "class_weights weight '-1' of label 'ok' is not a positive number" in err
    assert not (tmp_path / "out").exists()


def test_a_description_without_class_weights_records_as_before_so_older_runs_resume():
    """results.json's data.description gains no class_weights key unless a task file states weights: a
    run written before the key existed is resumed, not refused as changed data."""
    from tasks.text_data import _description
    from tasks.text_task import TextDescription

    assert "class_weights" not in _description(TextDescription(train="t.csv", text=("text",)), None)
    stated = _description(TextDescription(train="t.csv", text=("text",), class_weights="balanced"), None)
    assert stated["class_weights"] == "balanced"
