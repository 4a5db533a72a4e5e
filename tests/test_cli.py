"""`harness run glue` end to end on a tiny model and tiny data, the run its command line builds, resume
refusals, outputs it cannot write, `harness tasks|models|init`; every bad input is one line and exit 2."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from tests import mlflow_store
from tests.conftest import REPO, glue_args, run_cli, write_tiny_model


def statuses(tmp_path):
    return mlflow_store.statuses(tmp_path / "mlflow.db", experiment="glue")  # not the leaderboard's rows


@pytest.mark.slow
def test_run_glue_end_to_end(tiny_model, glue_data, tmp_path, capsys):
    code, out, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte,stsb,cola", "--seeds", "2",
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
    # what computed it, as resolved: never "auto"
    assert (results["precision"], results["compile"], results["accelerator"]) == ("fp32", "off", "cpu")
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
    assert results["submission"]["missing"] == ["SST-2.tsv", "MRPC.tsv", "QQP.tsv", "MNLI-m.tsv", "MNLI-mm.tsv",
                                                "QNLI.tsv", "WNLI.tsv", "AX.tsv"]
    assert "\nnote: glue_submission.zip lacks 8 of the 11 GLUE server files (SST-2.tsv, MRPC.tsv, " in out
    names = statuses(tmp_path)
    assert names["rte seed 1"] == "FINISHED" and len(names) == 7  # parent + 6 nested
    assert (tmp_path / "out" / "models" / "rte-seed0" / "model.safetensors").is_file()


def test_glue_cuts_its_128_tokens_to_a_model_of_fewer_positions(tiny_model, tmp_path, capsys):
    # RTE pairs of ~100 tokens on the tiny model's 64 positions: cut to them (as text and tagging cut theirs,
    # and the ONNX bundle), recorded as used, where 128 overflowed the position embeddings mid-training.
    rte = tmp_path / "glue" / "RTE"
    rte.mkdir(parents=True)
    long = " ".join(["the cat sat on the mat and looked at the dog"] * 5)
    rows = [f"{i}\t{long} {i}\t{long}\t{('entailment', 'not_entailment')[i % 2]}" for i in range(8)]
    for split in ("train", "dev"):
        (rte / f"{split}.tsv").write_text("\n".join(["index\tsentence1\tsentence2\tlabel", *rows]) + "\n")
    code, _, err = run_cli(["run", "glue", "--model", tiny_model, "--data-dir", tmp_path / "glue", "--tasks", "rte",
                            "--output-dir", tmp_path / "out", "--tracking-uri", "none", "num_epochs=1",
                            "batch_size=8", "precision=fp32", "predict_test=false", "save_models=false"], capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["runs"][0]["resolved_config"]["max_length"] == 64


@pytest.mark.slow
def test_parent_run_logs_settings_as_used_and_the_glue_score(tiny_model, glue_data, tmp_path, capsys):
    code, _, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte,cola", "batch_size=8",
                                 "save_models=false"), capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    found = {r.info.run_name: r for r in mlflow_store.runs(tmp_path / "mlflow.db", experiment="glue")}
    parent = found[f"{tiny_model.name} glue"].data
    # learning_rate by model size and max_length (GLUE's 128, cut to the tiny model's 64 positions) are the
    # same for both tasks; num_epochs is per task.
    assert parent.params["learning_rate"] == "0.0003" and parent.params["max_length"] == "64"
    assert parent.params["layerwise_lr_decay"] == "0.8" and parent.params["precision"] == results["precision"]
    assert (parent.params["cola.num_epochs"], parent.params["rte.num_epochs"]) == ("3", "10")
    assert "num_epochs" not in parent.params and "None" not in (parent.params["learning_rate"],
                                                               parent.params["max_length"])
    assert parent.metrics["glue_score"] == pytest.approx(results["glue_score"])
    assert found["rte seed 0"].data.params["precision"] == results["precision"]
    # compile as resolved on this device (a CPU: off), never "auto"
    assert parent.params["compile"] == found["rte seed 0"].data.params["compile"] == "off"
    assert found["rte seed 0"].data.params["num_epochs"] == "10"


@pytest.fixture
def glue_runs(tmp_path, monkeypatch) -> list:
    """The GlueInvocation each `harness run glue` hands to run_glue, which trains nothing here; run in tmp_path,
    at 2026-11-26 15:30:05 for a default --output-dir."""
    from datetime import datetime

    import harness.commands.run
    import harness.finetuning.glue_finetuning

    class Clock:
        @staticmethod
        def now():
            return datetime(2026, 11, 26, 15, 30, 5)

    seen = []

    def fake_run_glue(invocation, progress=None):
        seen.append(invocation)
        return {"summary": {}, "runs": [], "glue_score": 0.5}

    monkeypatch.setattr(harness.finetuning.glue_finetuning, "run_glue", fake_run_glue)
    monkeypatch.setattr(harness.commands.run, "datetime", Clock)
    monkeypatch.chdir(tmp_path)
    return seen


def test_a_plain_run_glue_hands_down_the_recipe_as_it_is(glue_runs, capsys):
    from pathlib import Path

    from harness.finetuning.glue_finetuning import GlueInvocation
    from tasks.config import FinetuneConfig
    from tasks.registry import GLUE_TASKS

    code, out, err = run_cli(["run", "glue", "--model", "runs/pretrain/tiny"], capsys)
    assert code == 0, err
    assert glue_runs == [GlueInvocation(
        model="runs/pretrain/tiny",
        tasks=(GLUE_TASKS["cola"], GLUE_TASKS["mrpc"], GLUE_TASKS["stsb"], GLUE_TASKS["rte"]),  # registry order
        output_dir=Path("runs/glue/tiny-20261126-153005"), config=FinetuneConfig(), seeds=1, data_dir=None,
        tracking_uri=None, leaderboard=True, search=None)]
    assert out.endswith("results: runs/glue/tiny-20261126-153005/results.json\n")


def test_run_glue_flags_config_file_and_overrides_build_the_run(glue_runs, tmp_path, capsys):
    from pathlib import Path

    from harness.finetuning.glue_finetuning import GlueInvocation
    from tasks.config import FinetuneConfig
    from tasks.registry import GLUE_TASKS

    (tmp_path / "glue.toml").write_text("learning_rate = 1e-4\nnum_epochs = 5\n")
    code, _, err = run_cli(["run", "glue", "--model", "electra-small", "--tasks", "rte,cola", "--seeds", "3",
                            "--data-dir", "d", "--output-dir", "o", "--tracking-uri", "none", "--config",
                            tmp_path / "glue.toml", "num_epochs=2", "batch_size=8"], capsys)
    assert code == 0, err
    assert glue_runs == [GlueInvocation(
        model="electra-small", tasks=(GLUE_TASKS["cola"], GLUE_TASKS["rte"]), output_dir=Path("o"),
        config=FinetuneConfig(learning_rate=1e-4, num_epochs=2.0, batch_size=8), seeds=3, data_dir="d",
        tracking_uri="none", leaderboard=True, search=None)]


def test_resume_refusal_names_each_differing_setting(tiny_model, glue_data, tmp_path, capsys):
    from foundation.models.resolve import resolve_model
    from harness.finetuning import glue_finetuning, records
    from reports import results_schema
    from tasks.config import FinetuneConfig

    earlier = FinetuneConfig(learning_rate=3e-4, num_epochs=1.0, head="electra")  # as a run records it
    model = results_schema.ModelBlock(name=str(tiny_model), path=resolve_model(str(tiny_model)))
    results_schema.write(tmp_path / "out" / results_schema.FILE,
                         records.fresh_results(glue_finetuning.RESULTS_FORMAT, model, earlier, ["rte"], 1))
    code, _, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "learning_rate=1e-4",
                                 "num_epochs=1", "head=hf"), capsys)
    assert code == 2 and err == (
        f"harness: error: {str(tmp_path / 'out')!r} holds results made with other settings (learning_rate: "
        "0.0003 -> 0.0001; head: 'electra' -> 'hf'); resume it with the same settings, or pass a new "
        "--output-dir\n")


@pytest.mark.parametrize("body", [b'{"runs": [', b"\xff\xfe not text", b'["a list"]'])
def test_a_corrupt_results_json_on_resume_is_one_line(body, tiny_model, glue_data, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_bytes(body)
    code, _, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"harness: error: {str(tmp_path / 'out' / 'results.json')!r} is not a")
    assert "move it away to start this run directory afresh, or pass a new --output-dir" in err
    assert (tmp_path / "out" / "results.json").read_bytes() == body  # left for the user to look at


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only view (bind mount) of a folder holding `mlflow.db`, a real store, and `hf/`, where this
    process may mount (root here); else a path under a regular file, which nobody, root included, can
    write to."""
    from harness.tracking import mlflow_runs

    source, folder = tmp_path / "rw", tmp_path / "ro"
    (source / "hf").mkdir(parents=True)
    folder.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(folder)], capture_output=True).returncode != 0:
        (tmp_path / "a-file").write_text("")
        yield tmp_path / "a-file" / "ro"
        return
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        mlflow_runs.use_experiment("glue", f"sqlite:///{source / 'mlflow.db'}")
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
def test_unwritable_mlflow_store_or_hf_home_is_one_line_before_training(read_only_dir, tiny_model, glue_data,
                                                                        tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    def must_not_train(*a, **k):
        raise AssertionError("trained before finding that its outputs cannot be written")

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", must_not_train)
    args = ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte",
            "--output-dir", str(tmp_path / "out")]
    code, _, err = run_cli([*args, "--tracking-uri", f"sqlite:///{read_only_dir / 'mlflow.db'}"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "is not writable (" in err and "; pass --tracking-uri sqlite:///A/WRITABLE/mlflow.db" in err, err
    # HF_HOME is read when the Hugging Face libraries are imported: set it for a fresh process
    env = {k: v for k, v in os.environ.items() if k != "HF_MODULES_CACHE"} | {
        "HF_HOME": str(read_only_dir / "hf"), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args, "--tracking-uri",
                           f"sqlite:///{tmp_path / 'mlflow.db'}"], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    code, err = done.returncode, done.stderr
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / "results.json").exists()
    assert err.startswith("harness: error: the Hugging Face modules cache (HF_HOME/modules, where `evaluate` "
                          f"keeps the metric modules) {str(read_only_dir / 'hf' / 'modules')!r} is not "
                          "writable ("), err
    assert err.rstrip().endswith("; set HF_HOME (or HF_MODULES_CACHE) to a writable folder"), err


def test_setting_differences_name_the_model_blocks_and_keys_an_older_version_lacked():
    from harness.finetuning.results_file import setting_differences

    previous = {"format": "f/1", "model": {"name": "a", "path": "/m/a"}, "config": {"seed": 0},
                "data": {"num_dev_windows": 10}, "tasks": ["squad"]}
    fresh = {"format": "f/1", "model": {"name": "b", "path": "/m/b"}, "config": {"seed": 0, "head": "electra"},
             "data": {"num_dev_windows": 12}, "tasks": ["squad"]}
    assert setting_differences(previous, fresh, ("format", "config", "data", "tasks")) == [
        "model: '/m/a' -> '/m/b'", "head: 'hf' -> 'electra'", "data.num_dev_windows: 10 -> 12"]  # hf: before head
    assert setting_differences(previous, previous | {"model": fresh["model"] | {"path": "/m/a"}},
                               ("format", "config", "data", "tasks")) == []


BAD_INPUTS = {
    "unknown task": (["--tasks", "rte,sst"], "unknown task 'sst'; choose from cola"),
    "bad override": (["lerning_rate=1"], "unknown setting 'lerning_rate'"),
    "bad seeds": (["--seeds", "0"], "--seeds must be at least 1"),
    "nan learning rate": (["learning_rate=nan"],
                          "setting learning_rate='nan': expected a finite number (float), not nan"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_arguments(case, tiny_model, glue_data, tmp_path, capsys):
    extra, message = BAD_INPUTS[case]
    code, out, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, *extra), capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_bad_model_and_data(tiny_model, glue_data, tmp_path, capsys):
    # (model, extra arguments, message): a second --model would make a grid of two (tests/test_grid.py)
    cases = [
        ("electra-huge", [], "unknown model 'electra-huge'; choose one of minilm-l6, electra-small"),
        (tmp_path / "nope", [], "does not exist"),
        (tiny_model, ["--data-dir", str(tmp_path / "nodata")], "GLUE data directory"),
    ]
    no_weights = write_tiny_model(tmp_path / "noweights")
    (no_weights / "model.safetensors").unlink()
    capsys.readouterr()  # drop the fixture's own save progress output
    cases.append((no_weights, [], "has a config.json but no weights"))
    (glue_data / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\n")
    cases.append((tiny_model, [], "dev.tsv:2: expected 4 tab-separated fields, found 3"))
    for model, extra, message in cases:
        code, _, err = run_cli(glue_args(model, glue_data, tmp_path, "--tasks", "rte") + extra, capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (model, extra, err)
        assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_listings(capsys):
    code, out, _ = run_cli(["tasks"], capsys)
    assert code == 0 and "mrpc" in out and "f1,accuracy" in out and "predicted with the MNLI model" in out
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["squad"].split() == ["squad", "exact_match,f1", "answer", "spans", "2", "harness", "run",
                                     "squad", "--version", "1.1"]
    assert rows["squad_v2"].split()[:5] == ["squad_v2", "exact,f1,best_exact,best_f1", "answer", "spans,",
                                            "unanswerable"]
    assert "harness run tagging --task chunk" in rows["chunk"]
    assert rows["multilabel"].split()[:2] == ["multilabel", "micro_f1,macro_f1"]
    code, out, _ = run_cli(["models"], capsys)
    assert code == 0 and "google/electra-base-discriminator" in out and "electra-tiny" in out


def test_init_writes_loadable_checkpoint(tiny_model, tmp_path, capsys):
    import transformers

    code, out, err = run_cli(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                          str(tmp_path / "init")], capsys)
    assert code == 0 and err == ""  # no "Writing model shards" bar
    model = transformers.ElectraForSequenceClassification.from_pretrained(tmp_path / "init")
    assert model.config.hidden_size == 128 and model.config.vocab_size == len(
        transformers.AutoTokenizer.from_pretrained(tmp_path / "init"))
    # An untrained control cost 0 pre-training FLOPs, and the leaderboard says so instead of "unknown".
    from foundation.models.identity import identify
    from reports import accounting

    control = identify(str(tmp_path / "init"), str(tmp_path / "init"), {})
    flops, basis = accounting.pretraining(control)
    assert flops == 0.0 and "none (random init) objective, 0 steps" in basis
    code, _, err = run_cli(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init")], capsys)
    assert code == 2 and "is not empty" in err
    code, out, _ = run_cli(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init"), "--keep-existing"], capsys)
    assert code == 0 and "keeping" in out


def test_settings_on_both_sides_of_a_flag_are_all_kept_in_order(capsys):
    from harness.cli import parse
    from harness.kinds import DEST

    args = parse(["run", "glue", "--model", "m", "num_epochs=1", "--tasks", "rte", "batch_size=8", "seed=2"])
    assert getattr(args, DEST + "tasks") == "rte" and args.overrides == ["num_epochs=1", "batch_size=8", "seed=2"]
    args = parse(["pretrain", "--preset", "electra-tiny", "--corpus", "c", "--output", "o", "a=1", "--max-flops",
                  "1e9", "b=2"])
    assert args.overrides == ["a=1", "b=2"]
    # a stray word that is no setting, or a setting given to a command that takes none, is still argparse's error
    for argv in (["run", "glue", "--model", "m", "a=1", "--tasks", "rte", "oops"], ["tasks", "a=1"]):
        with pytest.raises(SystemExit) as stop:
            parse(argv)
        assert stop.value.code == 2
    assert "unrecognized arguments: oops" in capsys.readouterr().err
