"""`harness eval`: a fine-tuned checkpoint scored without training, its labels matched by name, its
outputs paired with a run's by `harness compare`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import glue_args, run_cli, write_glue_dir


@pytest.fixture(scope="module")
def glue_run(tiny_model, tmp_path_factory) -> Path:
    """One seed of RTE and STS-B, its models saved: what eval scores and compare pairs."""
    from harness.cli import main

    root = tmp_path_factory.mktemp("eval")
    data = write_glue_dir(root / "glue_data")
    args = glue_args(tiny_model, data, root, "--tasks", "rte,stsb", "num_epochs=1", "precision=fp32",
                     "predict_test=false")
    assert main([str(a) for a in args]) == 0
    return root


def _eval(model, root: Path, out: Path, tasks: str, capsys):
    return run_cli(["eval", "glue", "--model", model, "--tasks", tasks, "--data-dir", root / "glue_data",
                    "--output-dir", out, "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}", "precision=fp32"],
                   capsys)


@pytest.mark.slow
def test_eval_scores_a_saved_model_as_its_run_did_and_compare_pairs_them(glue_run, tmp_path, capsys):
    run = json.loads((glue_run / "out" / "results.json").read_text())
    for task in ("rte", "stsb"):
        code, out, _ = _eval(glue_run / "out" / "models" / f"{task}-seed0", glue_run, tmp_path / task, task,
                             capsys)
        assert code == 0
        evaluated = json.loads((tmp_path / task / "results.json").read_text())
        assert evaluated["evaluated"] is True and evaluated["runs"][0]["num_train_steps"] == 0
        trained = next(r for r in run["runs"] if r["task"] == task)
        # the same weights on the same dev examples: the run's final dev scores (STS-B on its 0..5 scale)
        assert evaluated["runs"][0]["metrics"]["validation"] == pytest.approx(trained["metrics"]["validation"],
                                                                            abs=1e-4)
        scored = [json.loads((folder / "predictions" / f"{task}-seed0" / "dev_outputs.json").read_text())
                  ["splits"]["validation"]["predictions"] for folder in (tmp_path / task, glue_run / "out")]
        assert scored[0] == pytest.approx(scored[1], abs=1e-4)  # STS-B on its 0..5 scale, not 5x it
    code, out, _ = run_cli(["compare", tmp_path / "rte", glue_run / "out", "--tasks", "rte"], capsys)
    assert code == 0 and "+0.00" in out


@pytest.mark.slow
def test_labels_are_matched_by_name_not_position(glue_run, tmp_path, capsys):
    """RTE's classifier with its two output rows and label names swapped predicts the same labels."""
    import torch
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(glue_run / "out" / "models" /
                                                                            "rte-seed0")
    with torch.no_grad():
        model.classifier.out_proj.weight.copy_(model.classifier.out_proj.weight.flip(0))
        model.classifier.out_proj.bias.copy_(model.classifier.out_proj.bias.flip(0))
    names = model.config.id2label
    model.config.id2label = {0: names[1], 1: names[0]}
    model.config.label2id = {names[1]: 0, names[0]: 1}
    model.save_pretrained(tmp_path / "swapped")
    transformers.AutoTokenizer.from_pretrained(glue_run / "out" / "models" / "rte-seed0").save_pretrained(
        tmp_path / "swapped")
    assert _eval(tmp_path / "swapped", glue_run, tmp_path / "out", "rte", capsys)[0] == 0
    original = (glue_run / "out" / "predictions" / "rte-seed0" / "validation.tsv").read_text()
    assert (tmp_path / "out" / "predictions" / "rte-seed0" / "validation.tsv").read_text() == original


@pytest.mark.slow
def test_other_labels_or_no_head_are_one_line(glue_run, tiny_model, tmp_path, capsys):
    code, _, err = _eval(glue_run / "out" / "models" / "rte-seed0", glue_run, tmp_path / "a", "stsb", capsys)
    assert code == 2 and "regression task" in err
    config = glue_run / "out" / "models" / "rte-seed0" / "config.json"
    relabelled = tmp_path / "relabelled"
    relabelled.mkdir()
    for file in config.parent.iterdir():
        (relabelled / file.name).write_bytes(file.read_bytes())
    found = json.loads(config.read_text())
    found["id2label"] = {"0": "yes", "1": "no"}
    (relabelled / "config.json").write_text(json.dumps(found))
    code, _, err = _eval(relabelled, glue_run, tmp_path / "b", "rte", capsys)
    assert code == 2 and "labels (yes, no) are not rte's (entailment, not_entailment)" in err
    code, _, err = _eval(tiny_model, glue_run, tmp_path / "c", "rte", capsys)
    assert code == 2 and "ElectraForPreTraining, with no fine-tuned classification head" in err
    assert not (tmp_path / "c").exists()


def test_label_order_worked_by_hand():
    from types import SimpleNamespace

    from harness.finetuning.evaluation import label_order
    from tasks.registry import GLUE_TASKS

    config = SimpleNamespace(num_labels=2, id2label={0: "not_entailment", 1: "entailment"})
    assert label_order(config, GLUE_TASKS["rte"]).tolist() == [1, 0]  # task order: entailment first
    config.id2label = {0: "LABEL_0", 1: "LABEL_1"}
    assert label_order(config, GLUE_TASKS["rte"]) is None  # placeholders: taken in order


@pytest.mark.slow
def test_an_evaluated_text_checkpoint_and_its_card(glue_run, tmp_path, capsys):
    """harness eval text on a run's saved RTE model, read as your own data (RTE's files, their columns), then
    harness card: the card names the data by its sha256 and states the scores results.json holds."""

    rte = glue_run / "glue_data" / "RTE"
    code, _, err = run_cli(["eval", "text", "--model", glue_run / "out" / "models" / "rte-seed0", "--train",
                            rte / "train.tsv", "--dev", rte / "dev.tsv", "--text", "sentence1,sentence2",
                            "--label", "label", "--name", "rte-own", "--output-dir", tmp_path / "ev",
                            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "precision=fp32",
                            "save_models=true"], capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert results["evaluated"] is True and results["summary"]["rte-own"]["accuracy"]["n"] == 1
    glue = json.loads((glue_run / "out" / "results.json").read_text())
    trained = next(r for r in glue["runs"] if r["task"] == "rte")["metrics"]["validation"]["accuracy"]
    assert results["runs"][0]["metrics"]["validation"]["accuracy"] == pytest.approx(trained, abs=1e-9)
    assert not (tmp_path / "ev" / "models").exists()  # an evaluated checkpoint is not saved again
    # --dev alone: the checkpoint's id2label names the classes, and the score is the same
    code, _, err = run_cli(["eval", "text", "--model", glue_run / "out" / "models" / "rte-seed0", "--dev",
                            rte / "dev.tsv", "--text", "sentence1,sentence2", "--label", "label", "--name",
                            "rte-own", "--output-dir", tmp_path / "dev-only", "--tracking-uri",
                            f"sqlite:///{tmp_path / 'mlflow.db'}", "precision=fp32"], capsys)
    assert code == 0, err
    alone = json.loads((tmp_path / "dev-only" / "results.json").read_text())
    assert alone["runs"][0]["metrics"]["validation"]["accuracy"] == pytest.approx(trained, abs=1e-9)
    assert "train" not in alone["data"]["files"]


@pytest.mark.slow
def test_a_fine_tuned_checkpoint_from_a_hub_cache_is_scored_and_paired(glue_run, tmp_path, capsys, monkeypatch):
    """A fine-tuned RTE model published as someone/tiny-rte (a hub-layout cache, offline), with the placeholder
    label names many Hub checkpoints carry, scored by its Hub id and paired with the run by compare."""
    from huggingface_hub import constants

    from tests.families import write_hub_cache

    source = tmp_path / "published"
    source.mkdir()
    for file in (glue_run / "out" / "models" / "rte-seed0").iterdir():
        (source / file.name).write_bytes(file.read_bytes())
    config = json.loads((source / "config.json").read_text())
    config["id2label"], config["label2id"] = {"0": "LABEL_0", "1": "LABEL_1"}, {"LABEL_0": 0, "LABEL_1": 1}
    (source / "config.json").write_text(json.dumps(config))
    write_hub_cache(tmp_path / "hub", "someone/tiny-rte", source, commit="1" * 40)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    code, out, err = _eval("someone/tiny-rte", glue_run, tmp_path / "ev", "rte", capsys)
    assert code == 0, err
    assert "labels are unnamed (LABEL_0, LABEL_1); taken in order as entailment, not_entailment" in out
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert results["model"]["path"].endswith("snapshots/" + "1" * 40)
    code, out, _ = run_cli(["compare", tmp_path / "ev", glue_run / "out", "--tasks", "rte"], capsys)
    assert code == 0 and "+0.00" in out  # the same weights: no difference, paired example by example


@pytest.mark.slow
def test_a_squad_checkpoint_is_scored_with_the_heads_it_saved(tiny_model, tmp_path, capsys):
    """A SQuAD 2.0 run's saved span model (ELECTRA's answerability and joint heads beside it), scored by eval
    on the same held-out articles: the run's EM and F1, and compare pairs the two."""
    from tests.conftest import SQUAD_SMALL, squad_args, write_squad

    data = write_squad(tmp_path / "squad" / "dev-v2.0.json", "2.0")
    assert run_cli(squad_args(tiny_model, tmp_path, "--version", "2.0", "--dev-file", data, *SQUAD_SMALL,
                              "num_epochs=1"), capsys)[0] == 0
    run = json.loads((tmp_path / "out" / "results.json").read_text())
    code, out, err = run_cli(["eval", "squad", "--model", tmp_path / "out" / "models" / "squad_v2-seed0",
                              "--version", "2.0", "--dev-file", data, "--output-dir", tmp_path / "ev",
                              "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *SQUAD_SMALL], capsys)
    assert code == 0, err
    evaluated = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert evaluated["settings"]["answerability_head"] is True and evaluated["settings"]["joint_prediction"]
    assert evaluated["runs"][0]["metrics"]["validation"] == pytest.approx(run["runs"][0]["metrics"]["validation"],
                                                                        abs=1e-6)
    code, out, _ = run_cli(["compare", tmp_path / "ev", tmp_path / "out"], capsys)
    assert code == 0 and "+0.00" in out
    code, _, err = run_cli(["eval", "squad", "--model", tiny_model, "--version", "2.0", "--dev-file", data,
                            "--output-dir", tmp_path / "bad", *SQUAD_SMALL], capsys)
    assert code == 2 and "no fine-tuned span (question answering) head" in err
