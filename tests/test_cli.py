"""`harness` end to end on a tiny model and tiny data; every bad input is one line and exit 2."""

import json
import zipfile

import pytest

from harness.cli import main
from tests import mlflow_runs
from tests.conftest import write_tiny_model


def run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def glue_args(model, data, tmp_path, *extra):
    return ["run", "glue", "--model", str(model), "--data-dir", str(data), "--output-dir",
            str(tmp_path / "out"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *extra]


def statuses(tmp_path):
    return mlflow_runs.statuses(tmp_path / "mlflow.db", experiment="glue")  # not the leaderboard's rows


@pytest.mark.slow
def test_run_glue_end_to_end(tiny_model, glue_data, tmp_path, capsys):
    code, out, err = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte,stsb,cola", "--seeds", "2",
                                   "num_epochs=1", "batch_size=8", "precision=fp32"), capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["task"], r["seed"]) for r in results["runs"]] == [
        ("cola", 0), ("cola", 1), ("stsb", 0), ("stsb", 1), ("rte", 0), ("rte", 1)]
    assert results["config"]["batch_size"] == 8 and results["runs"][0]["resolved_config"]["learning_rate"] == 3e-4
    assert set(results["summary"]["stsb"]) >= {"score", "pearson", "spearman"}
    # ELECTRA's recipe, recorded: its optimiser, and STS-B (not RTE, CoLA) trained on both sentence orders
    assert results["config"]["optimizer"] == "electra" and results["config"]["double_unordered"] is True
    assert {r["task"]: (r["double_unordered"], r["num_train_examples"]) for r in results["runs"]} == {
        "cola": (False, 16), "stsb": (True, 32), "rte": (False, 16)}
    assert results["summary"]["rte"]["score"]["n"] == 2 and results["flops"]["pretrain_flops"] is None
    assert set(results["flops"]["finetune_flops"]) == {"cola", "stsb", "rte"}
    # GLUE in the paper's convention: CoLA MCC, STS-B Spearman (not its Pearson/Spearman mean), RTE accuracy.
    scores = [results["summary"][t][m]["median"] for t, m in (("cola", "mcc"), ("stsb", "spearman"),
                                                                ("rte", "accuracy"))]
    assert results["glue_score"] == pytest.approx(sum(scores) / 3) == results["glue"]["score"]
    assert results["glue"]["convention"].startswith("paper convention: CoLA mcc")
    # Intervals from the per-seed dev outputs: beside every median, and for the GLUE average.
    for task, label in (("cola", "mcc"), ("stsb", "spearman"), ("stsb", "score"), ("rte", "accuracy")):
        found = results["summary"][task][label]
        assert found["ci_low"] <= found["mean"] <= found["ci_high"], (task, label)
        assert found["ci_covers"] == "seeds and dev examples"
    assert results["glue"]["ci_low"] < results["glue"]["ci_high"]
    outputs = json.loads((tmp_path / "out" / "predictions" / "rte-seed1" / "dev_outputs.json").read_text())
    assert len(outputs["splits"]["validation"]["ids"]) == 8 and outputs["task"] == "rte"
    with zipfile.ZipFile(tmp_path / "out" / "glue_submission.zip") as archive:
        assert sorted(archive.namelist()) == ["CoLA.tsv", "RTE.tsv", "STS-B.tsv"]
        rte = archive.read("RTE.tsv").decode().splitlines()
    assert rte[0] == "index\tprediction" and len(rte) == 7
    assert {line.split("\t")[1] for line in rte[1:]} <= {"entailment", "not_entailment"}
    assert "GLUE" in out and "rte" in out and "median" in out
    names = statuses(tmp_path)
    assert names["rte seed 1"] == "FINISHED" and len(names) == 7  # parent + 6 nested
    assert (tmp_path / "out" / "models" / "rte-seed0" / "model.safetensors").is_file()


@pytest.mark.slow
def test_rerun_resumes_finished_pairs(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1", "save_models=false")
    assert run(args, capsys)[0] == 0
    import harness.glue_run

    def must_not_train(*a, **k):
        raise AssertionError("a finished (task, seed) was trained again")

    monkeypatch.setattr(harness.glue_run, "finetune", must_not_train)
    assert run(args, capsys)[0] == 0
    code, _, err = run(args[:-1] + ["num_epochs=2"], capsys)
    assert code == 2 and "holds results of another model or config" in err


def test_interrupt_marks_runs_killed(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    import harness.glue_run

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness.glue_run, "finetune", interrupted)
    code, _, _ = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 130
    assert set(statuses(tmp_path).values()) == {"KILLED"}
    assert not (tmp_path / "out" / "results.json").exists()


BAD_INPUTS = {
    "unknown task": (["--tasks", "rte,sst"], "unknown task 'sst'; choose from cola"),
    "bad override": (["lerning_rate=1"], "unknown setting 'lerning_rate'"),
    "bad seeds": (["--seeds", "0"], "--seeds must be at least 1"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_arguments(case, tiny_model, glue_data, tmp_path, capsys):
    extra, message = BAD_INPUTS[case]
    code, out, err = run(glue_args(tiny_model, glue_data, tmp_path, *extra), capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_bad_model_and_data(tiny_model, glue_data, tmp_path, capsys):
    cases = [
        (["--model", "electra-huge"], "unknown model 'electra-huge'; choose one of electra-small"),
        (["--model", str(tmp_path / "nope")], "does not exist"),
        (["--data-dir", str(tmp_path / "nodata")], "GLUE data directory"),
    ]
    no_weights = write_tiny_model(tmp_path / "noweights")
    (no_weights / "model.safetensors").unlink()
    capsys.readouterr()  # drop the fixture's own save progress output
    cases.append((["--model", str(no_weights)], "has a config.json but no weights"))
    (glue_data / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\n")
    cases.append(([], "dev.tsv:2: expected 4 tab-separated fields, found 3"))
    for extra, message in cases:
        code, _, err = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte") + extra, capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (extra, err)
        assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_hub_name_offline_says_what_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    code, _, err = run(["run", "glue", "--model", "electra-small", "--tasks", "rte", "--data-dir",
                        str(tmp_path)], capsys)
    assert code == 2
    assert "could not get 'electra-small' (google/electra-small-discriminator)" in err
    assert "pass a local checkpoint directory" in err


def test_listings(capsys):
    code, out, _ = run(["tasks"], capsys)
    assert code == 0 and "mrpc" in out and "f1,accuracy" in out and "predicted with the MNLI model" in out
    code, out, _ = run(["models"], capsys)
    assert code == 0 and "google/electra-base-discriminator" in out and "electra-tiny" in out


def test_init_writes_loadable_checkpoint(tiny_model, tmp_path, capsys):
    import transformers

    code, out, _ = run(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init")], capsys)
    assert code == 0
    model = transformers.ElectraForSequenceClassification.from_pretrained(tmp_path / "init")
    assert model.config.hidden_size == 128 and model.config.vocab_size == len(
        transformers.AutoTokenizer.from_pretrained(tmp_path / "init"))
    code, _, err = run(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init")], capsys)
    assert code == 2 and "is not empty" in err
    code, out, _ = run(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init"), "--keep-existing"], capsys)
    assert code == 0 and "keeping" in out
