"""`harness` end to end on a tiny model and tiny data; every bad input is one line and exit 2."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from harness.cli import main
from pretrain.common.errors import UserError
from tests import mlflow_store
from tests.conftest import REPO, check_wall_time_over_a_kill, write_tiny_model


def run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def glue_args(model, data, tmp_path, *extra):
    return ["run", "glue", "--model", str(model), "--data-dir", str(data), "--output-dir",
            str(tmp_path / "out"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *extra]


def statuses(tmp_path):
    return mlflow_store.statuses(tmp_path / "mlflow.db", experiment="glue")  # not the leaderboard's rows


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


def test_submission_takes_ax_from_mnli_and_names_missing_files(tmp_path):
    from harness.finetuning.glue_run import _write_submission
    from tasks.registry import SERVER_FILES

    predictions = tmp_path / "predictions"
    for task, seed, splits in (("mnli", 1, ("test_matched", "test_mismatched", "ax")), ("rte", 0, ("test",))):
        for split in splits:
            (predictions / f"{task}-seed{seed}").mkdir(parents=True, exist_ok=True)
            (predictions / f"{task}-seed{seed}" / f"{split}.tsv").write_text(f"index\tprediction\n0\t{split}\n")
    results = {"summary": {"mnli": {}, "rte": {}},
               "runs": [{"task": "mnli", "seed": 0, "score": 0.5}, {"task": "mnli", "seed": 1, "score": 0.7},
                        {"task": "rte", "seed": 0, "score": 0.6}]}
    found = _write_submission(tmp_path, results)
    with zipfile.ZipFile(tmp_path / "glue_submission.zip") as archive:
        assert sorted(archive.namelist()) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "RTE.tsv"]
        assert archive.read("AX.tsv").decode() == "index\tprediction\n0\tax\n"  # the best MNLI seed's
    assert len(SERVER_FILES) == 11 and SERVER_FILES[-1] == "AX.tsv"
    assert found["missing"] == ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "QNLI.tsv",
                                "WNLI.tsv"]
    assert found["note"] == (
        "glue_submission.zip lacks 7 of the 11 GLUE server files (CoLA.tsv, SST-2.tsv, MRPC.tsv, STS-B.tsv, "
        "QQP.tsv, QNLI.tsv, WNLI.tsv) and cannot be submitted as it is; run --tasks all (AX comes with MNLI) "
        "with test files in --data-dir for a complete one")


@pytest.mark.slow
def test_parent_run_logs_settings_as_used_and_the_glue_score(tiny_model, glue_data, tmp_path, capsys):
    code, _, err = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte,cola", "batch_size=8",
                                 "save_models=false"), capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    found = {r.info.run_name: r for r in mlflow_store.runs(tmp_path / "mlflow.db", experiment="glue")}
    parent = found[f"{tiny_model.name} glue"].data
    # learning_rate by model size and max_length are the same for both tasks; num_epochs is per task.
    assert parent.params["learning_rate"] == "0.0003" and parent.params["max_length"] == "128"
    assert parent.params["layerwise_lr_decay"] == "0.8" and parent.params["precision"] == results["precision"]
    assert (parent.params["cola.num_epochs"], parent.params["rte.num_epochs"]) == ("3", "10")
    assert "num_epochs" not in parent.params and "None" not in (parent.params["learning_rate"],
                                                               parent.params["max_length"])
    assert parent.metrics["glue_score"] == pytest.approx(results["glue_score"])
    assert found["rte seed 0"].data.params["precision"] == results["precision"]
    # compile as resolved on this device (a CPU: off), never "auto"
    assert parent.params["compile"] == found["rte seed 0"].data.params["compile"] == "off"
    assert found["rte seed 0"].data.params["num_epochs"] == "10"


@pytest.mark.slow
def test_predict_test_false_skips_the_test_sets(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    from tasks import finetune

    predicted = []

    def recording_predict(model, task, datasets, *args, **kwargs):
        predicted.extend(datasets)
        return real_predict(model, task, datasets, *args, **kwargs)

    real_predict = finetune.predict
    monkeypatch.setattr(finetune, "predict", recording_predict)
    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1", "save_models=false",
                     "predict_test=false")
    code, out, err = run(args, capsys)
    assert code == 0, err
    assert predicted and "test" not in predicted  # dev scored each epoch, the test set never
    assert not (tmp_path / "out" / "predictions" / "rte-seed0" / "test.tsv").exists()
    assert (tmp_path / "out" / "predictions" / "rte-seed0" / "validation.tsv").is_file()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["submission"]["file"] is None and not (tmp_path / "out" / "glue_submission.zip").exists()
    assert "note: no glue_submission.zip: test prediction was off (predict_test=false)" in out


def test_rerun_resumes_finished_pairs(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1", "save_models=false")
    assert run(args, capsys)[0] == 0
    import harness.finetuning.orchestration

    def must_not_train(*a, **k):
        raise AssertionError("a finished (task, seed) was trained again")

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", must_not_train)
    code, out, _ = run(args, capsys)
    assert code == 0 and "resume rte: kept seed 0 from results.json; nothing left to train" in out
    code, _, err = run([a for a in args if a != "num_epochs=1"] + ["num_epochs=2"], capsys)
    assert code == 2 and "with other settings (num_epochs: 1.0 -> 2.0); resume it with the same" in err


@pytest.mark.slow
def test_wall_time_adds_up_over_an_interrupted_run_and_its_resume(tiny_model, glue_data, tmp_path, capsys,
                                                                   monkeypatch):
    import harness.finetuning.orchestration

    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "--seeds", "2", "num_epochs=1",
                     "save_models=false")
    check_wall_time_over_a_kill(monkeypatch, harness.finetuning.orchestration, lambda: run(args, capsys)[0],
                                tmp_path / "out" / "results.json")


def test_resume_refusal_names_each_differing_setting(tiny_model, glue_data, tmp_path, capsys):
    from harness.finetuning import glue_run, records
    from pretrain.common import atomic
    from pretrain.common.models import resolve_model
    from tasks.config import FinetuneConfig

    earlier = FinetuneConfig(learning_rate=3e-4, num_epochs=1.0, head="electra")  # as a run records it
    atomic.write_json(tmp_path / "out" / "results.json", records.fresh_results(
        glue_run.RESULTS_FORMAT, str(tiny_model), resolve_model(str(tiny_model)), earlier, ["rte"], 1))
    code, _, err = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "learning_rate=1e-4",
                                 "num_epochs=1", "head=hf"), capsys)
    assert code == 2 and err == (
        f"harness: error: {str(tmp_path / 'out')!r} holds results made with other settings (learning_rate: "
        "0.0003 -> 0.0001; head: 'electra' -> 'hf'); resume it with the same settings, or pass a new "
        "--output-dir\n")


@pytest.mark.parametrize("body", [b'{"runs": [', b"\xff\xfe not text", b'["a list"]'])
def test_a_corrupt_results_json_on_resume_is_one_line(body, tiny_model, glue_data, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_bytes(body)
    code, _, err = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte"), capsys)
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


def test_unwritable_mlflow_store_or_hf_home_is_one_line_before_training(read_only_dir, tiny_model, glue_data,
                                                                        tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    def must_not_train(*a, **k):
        raise AssertionError("trained before finding that its outputs cannot be written")

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", must_not_train)
    args = ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte",
            "--output-dir", str(tmp_path / "out")]
    code, _, err = run([*args, "--tracking-uri", f"sqlite:///{read_only_dir / 'mlflow.db'}"], capsys)
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


@pytest.mark.slow
def test_diverging_seed_is_recorded_and_the_rest_go_on(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    real = harness.finetuning.orchestration.finetune

    def diverges_on_rte_seed0(model, built, config, *a, **k):
        if built.task.name == "rte" and config.seed == 0:
            raise FloatingPointError("training loss became nan by step 2; lower learning_rate")
        return real(model, built, config, *a, **k)

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", diverges_on_rte_seed0)
    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte,cola", "--seeds", "2", "num_epochs=1",
                     "save_models=false")
    code, out, err = run(args, capsys)
    message = ("harness: error: 1 fine-tuning diverged (rte seed 0: training loss became nan by step 2; lower "
               "learning_rate); they are recorded as diverged in results.json and left out of the summaries; "
               "re-run with a lower learning_rate into a new --output-dir")
    assert code == 2 and err.splitlines()[-1] == message and "Traceback" not in err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["task"], r["seed"]) for r in results["runs"]] == [("cola", 0), ("cola", 1), ("rte", 1)]
    assert [(r["task"], r["seed"]) for r in results["diverged"]] == [("rte", 0)]
    assert results["summary"]["rte"]["score"]["n"] == 1 and results["summary"]["rte"]["diverged_seeds"] == 1
    assert results["summary"]["cola"]["diverged_seeds"] == 0
    assert "diverged: rte seed 0 (training loss became nan by step 2; lower learning_rate), left out of " \
           "medians and GLUE" in out
    names = statuses(tmp_path)
    assert names["rte seed 0"] == "FAILED" and names["rte seed 1"] == "FINISHED" and names["cola seed 1"] == "FINISHED"
    # Resuming does not retry it (the same seed diverges again) nor hides it: same line, same exit.
    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", lambda *a, **k: pytest.fail("trained again"))
    code, _, err = run(args, capsys)
    assert code == 2 and err.splitlines()[-1] == message


def test_interrupt_marks_runs_killed(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", interrupted)
    code, _, _ = run(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 130
    assert set(statuses(tmp_path).values()) == {"KILLED"}
    assert not (tmp_path / "out" / "results.json").exists()


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


def write_pickle_bomb_model(directory, marker):
    """A tiny checkpoint whose pytorch_model.bin would run `touch marker` if unpickled unsafely."""
    import os

    import torch
    from safetensors.torch import load_file

    write_tiny_model(directory)
    weights = load_file(directory / "model.safetensors")
    (directory / "model.safetensors").unlink()

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    torch.save({**weights, "payload": Payload()}, directory / "pytorch_model.bin")
    return directory


def test_unsafe_pickle_weights_are_refused_with_the_reason(tmp_path):
    import transformers

    from tasks.loading import from_pretrained_quietly

    model = write_pickle_bomb_model(tmp_path / "bomb", tmp_path / "ran")
    with pytest.raises(UserError, match=r"not a plain tensor pickle \(it would call posix.system\)"):
        from_pretrained_quietly(transformers.ElectraForSequenceClassification, model)
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow
def test_run_refuses_unsafe_pickle_weights_in_one_line(glue_data, tmp_path, capsys):
    model = write_pickle_bomb_model(tmp_path / "bomb", tmp_path / "ran")
    capsys.readouterr()
    code, _, err = run(glue_args(model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1"), capsys)
    assert code == 2 and "Traceback" not in err and err.strip().splitlines()[-1] == (
        f"harness: error: refused to load the pytorch_model.bin weights in {str(model)!r}: the file is not a "
        "plain tensor pickle (it would call posix.system), and unpickling anything else can run code; get "
        "model.safetensors from a source you trust, or convert a copy you trust with save_pretrained()")
    assert not (tmp_path / "ran").exists()


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """snapshot_download over local folders: copies the repo's files matching allow_patterns into a cache."""
    import fnmatch
    import shutil

    import huggingface_hub

    repos, calls = tmp_path / "hub", []

    def snapshot_download(repo_id, revision=None, allow_patterns=None):
        calls.append(list(allow_patterns))
        snapshot = tmp_path / "cache" / repo_id
        snapshot.mkdir(parents=True, exist_ok=True)
        for file in (repos / repo_id).iterdir():
            if any(fnmatch.fnmatch(file.name, p) for p in allow_patterns):
                shutil.copy(file, snapshot / file.name)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return repos, calls


def test_hub_repo_with_only_pytorch_bin_loads(fake_hub, tiny_model):
    import shutil

    import torch
    import transformers
    from safetensors.torch import load_file

    from pretrain.common.models import resolve_model
    from tasks.loading import from_pretrained_quietly

    repos, calls = fake_hub
    repo = repos / "google/electra-small-discriminator"  # as Google published it: weights as a .bin only
    shutil.copytree(tiny_model, repo)
    weights = load_file(repo / "model.safetensors")
    (repo / "model.safetensors").unlink()
    torch.save(weights, repo / "pytorch_model.bin")
    folder = resolve_model("electra-small")
    assert calls == [["*.json", "*.txt", "*.model", "*.safetensors"],
                     ["*.json", "*.txt", "*.model", "pytorch_model*.bin"]]
    model = from_pretrained_quietly(transformers.ElectraForPreTraining, folder)
    assert torch.equal(model.state_dict()["electra.embeddings.word_embeddings.weight"],
                       weights["electra.embeddings.word_embeddings.weight"])


def test_hub_repo_with_safetensors_never_fetches_the_pickle(fake_hub, tiny_model):
    import shutil
    from pathlib import Path

    from pretrain.common.models import resolve_model

    repos, calls = fake_hub
    repo = repos / "google/electra-small-discriminator"
    shutil.copytree(tiny_model, repo)
    (repo / "pytorch_model.bin").write_bytes(b"never read")
    folder = Path(resolve_model("electra-small"))
    assert calls == [["*.json", "*.txt", "*.model", "*.safetensors"]]
    assert (folder / "model.safetensors").is_file() and not (folder / "pytorch_model.bin").exists()


def test_hub_snapshot_without_weights_is_one_line(fake_hub, tiny_model, tmp_path, capsys):
    import shutil

    repos, calls = fake_hub
    repo = repos / "google/electra-small-discriminator"
    shutil.copytree(tiny_model, repo)
    (repo / "model.safetensors").unlink()
    code, _, err = run(["run", "glue", "--model", "electra-small", "--tasks", "rte", "--data-dir",
                        str(tmp_path)], capsys)
    snapshot = tmp_path / "cache" / "google/electra-small-discriminator"
    assert code == 2 and err == (
        f"harness: error: the Hub snapshot of 'google/electra-small-discriminator' (in {str(snapshot)!r}) has "
        "no weights (model.safetensors or pytorch_model.bin); connect once so they download, or pass a local "
        "checkpoint directory as --model\n")


@pytest.mark.parametrize("text, reason", [
    ('{"model_type": "electra",', "is not valid JSON (Expecting property name enclosed in double quotes: "
                                  "line 1 column 26 (char 25))"),
    ('{"model_type": "electra", "hidden_size": "big"}', "is not a usable model config (Validation error for "
                                                         "field 'hidden_size': TypeError: Field 'hidden_size' "
                                                         "expected int, got str (value: 'big'))")])
def test_broken_config_json_is_named_not_the_tokenizer(text, reason, glue_data, tmp_path, capsys):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(write_tiny_model(tmp_path / "original"), model)
    (model / "config.json").write_text(text)
    capsys.readouterr()
    code, _, err = run(glue_args(model, glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err == (f"harness: error: {str(model / 'config.json')!r} {reason}; restore it or "
                                 "save the model again with save_pretrained()\n")


def test_hub_name_offline_says_what_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    code, _, err = run(["run", "glue", "--model", "electra-small", "--tasks", "rte", "--data-dir",
                        str(tmp_path)], capsys)
    assert code == 2
    assert "'google/electra-small-discriminator' is not a local directory and could not be had" in err
    assert "pass a local checkpoint directory" in err and err.count("\n") == 1


def test_listings(capsys):
    code, out, _ = run(["tasks"], capsys)
    assert code == 0 and "mrpc" in out and "f1,accuracy" in out and "predicted with the MNLI model" in out
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["squad"].split() == ["squad", "exact_match,f1", "answer", "spans", "2", "harness", "run",
                                     "squad", "--version", "1.1"]
    assert rows["squad_v2"].split()[:5] == ["squad_v2", "exact,f1,best_exact,best_f1", "answer", "spans,",
                                            "unanswerable"]
    code, out, _ = run(["models"], capsys)
    assert code == 0 and "google/electra-base-discriminator" in out and "electra-tiny" in out


def test_init_writes_loadable_checkpoint(tiny_model, tmp_path, capsys):
    import transformers

    code, out, err = run(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                          str(tmp_path / "init")], capsys)
    assert code == 0 and err == ""  # no "Writing model shards" bar
    model = transformers.ElectraForSequenceClassification.from_pretrained(tmp_path / "init")
    assert model.config.hidden_size == 128 and model.config.vocab_size == len(
        transformers.AutoTokenizer.from_pretrained(tmp_path / "init"))
    # An untrained control cost 0 pre-training FLOPs, and the leaderboard says so instead of "unknown".
    from reports import accounting

    flops, basis = accounting.pretraining(str(tmp_path / "init"), tmp_path / "init")
    assert flops == 0.0 and "none (random init) objective, 0 steps" in basis
    code, _, err = run(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init")], capsys)
    assert code == 2 and "is not empty" in err
    code, out, _ = run(["init", "--preset", "electra-tiny", "--tokenizer", str(tiny_model), "--output",
                        str(tmp_path / "init"), "--keep-existing"], capsys)
    assert code == 0 and "keeping" in out


def test_settings_on_both_sides_of_a_flag_are_all_kept_in_order(capsys):
    from harness.cli import parse

    args = parse(["run", "glue", "--model", "m", "num_epochs=1", "--tasks", "rte", "batch_size=8", "seed=2"])
    assert args.tasks == "rte" and args.overrides == ["num_epochs=1", "batch_size=8", "seed=2"]
    args = parse(["pretrain", "--preset", "electra-tiny", "--corpus", "c", "--output", "o", "a=1", "--max-flops",
                  "1e9", "b=2"])
    assert args.overrides == ["a=1", "b=2"]
    # a stray word that is no setting, or a setting given to a command that takes none, is still argparse's error
    for argv in (["run", "glue", "--model", "m", "a=1", "--tasks", "rte", "oops"], ["tasks", "a=1"]):
        with pytest.raises(SystemExit) as stop:
            parse(argv)
        assert stop.value.code == 2
    assert "unrecognized arguments: oops" in capsys.readouterr().err
