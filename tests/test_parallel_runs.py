"""Real processes side by side: seeds run in parallel into one --output-dir all land in its
results.json, and runs started together on a new machine share one MLflow store's creation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from tests import mlflow_store, processes
from tests.conftest import write_corpus
from tests.fixtures_processes import mlflow_store_copy


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    """`python ARGS` in cwd, as tests/processes.py starts every child."""
    return processes.start(args, cwd, module=None)


def finish(started: list[subprocess.Popen]) -> list[tuple[int, str]]:
    return [processes.finish(process) for process in started]


@pytest.mark.slow
def test_seeds_run_side_by_side_into_one_output_dir_all_land(tiny_model, glue_data, tmp_path, tmp_path_factory,
                                                            capsys, monkeypatch):
    """Seed 1 in a real process, seed 0 in this one, which waits before its first write to results.json
    until the other has written and ended: neither read the other's records as it began (its training
    takes well under a second, its start ~10 s), so only the merge under the lock lands both."""
    from harness.finetuning import results_file

    out = tmp_path / "out"
    uri = mlflow_store_copy(tmp_path_factory, tmp_path / "mlflow.db")  # its creation: the test below
    args = ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte,stsb",
            "--output-dir", str(out), "--tracking-uri", uri, "num_epochs=1", "save_models=false",
            "predict_test=false"]
    other, ended = start(["-m", "harness.cli", *args, "seed=1"], tmp_path), []
    save = results_file.ResultsFile.save

    def save_once_the_other_ended(self, results):
        if not ended:
            assert not self.path.exists()  # this invocation read no records of the other's as it began
            ended.append(processes.finish(other))
        save(self, results)

    monkeypatch.setattr(results_file.ResultsFile, "save", save_once_the_other_ended)
    try:
        here = main([*args, "seed=0"])
    finally:
        if not ended:
            ended.append(processes.finish(other))
    assert [here, ended[0][0]] == [0, 0], ended[0][1]
    results = json.loads((out / "results.json").read_text())
    assert sorted((r["task"], r["seed"]) for r in results["runs"]) == [
        ("rte", 0), ("rte", 1), ("stsb", 0), ("stsb", 1)]
    # the invocation that finished last summarised both seeds
    assert results["summary"]["rte"]["score"]["n"] == 2 and results["summary"]["stsb"]["score"]["n"] == 2
    assert results["seeds"] == 2  # each invocation asked for one; the folder holds two
    for task in ("rte", "stsb"):
        for number in (0, 1):
            assert (out / "predictions" / f"{task}-seed{number}" / "dev_outputs.json").is_file()
    # a third invocation with other settings is refused in one line, not merged (in this process: the
    # refusal reads results.json before any training, so a process of its own adds nothing)
    capsys.readouterr()  # what came before (the copied store's making, in this process's first use)
    code = main(["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte",
                 "--output-dir", str(out), "--tracking-uri", uri, "num_epochs=2", "save_models=false",
                 "predict_test=false", "seed=2"])
    err = capsys.readouterr().err
    assert code == 2 and "holds results made with other settings (num_epochs: 1.0 -> 2.0)" in err
    assert err.count("\n") == 1, err


@pytest.mark.slow
def test_runs_started_together_share_a_new_mlflow_store(tmp_path):
    """Four processes open a store that does not exist yet: one creates and migrates it, the rest wait."""
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    code = f"from harness.tracking import mlflow_runs; mlflow_runs.use_experiment('glue', {uri!r}); print('ok')"
    finished = finish([start(["-c", code], tmp_path) for _ in range(4)])
    assert [(c, o.strip().splitlines()[-1]) for c, o in finished] == [(0, "ok")] * 4, finished
    experiments = [e.name for e in mlflow_store.client(tmp_path / "store" / "mlflow.db").search_experiments()]
    assert sorted(experiments) == ["Default", "glue"]


@pytest.mark.slow
def test_a_resume_ends_killed_the_runs_a_kill_9_left_running(tiny_model, glue_data, tmp_path, tmp_path_factory,
                                                            capsys):
    import signal
    import time

    from harness.tracking import mlflow_runs
    from tasks.finetune_state import seed_path

    store = tmp_path / "mlflow.db"
    uri = mlflow_store_copy(tmp_path_factory, store)
    # 8 epochs of 1 step: seed 1 is killed once its first epoch's state is written (its MLflow run open),
    # with 7 epochs (a second or two) left for the kill to arrive in
    args = ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte",
            "--seeds", "2", "--output-dir", str(tmp_path / "out"), "--tracking-uri", uri,
            "num_epochs=8", "save_models=false", "predict_test=false"]
    mlflow_runs.use_experiment("glue", uri)  # created here, so this test's reads never race its creation
    killed = start(["-m", "harness.cli", *args], tmp_path)
    deadline = time.monotonic() + 300
    while not seed_path(tmp_path / "out", "rte", 1).is_file():
        assert killed.poll() is None and time.monotonic() < deadline, killed.stdout.read()
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)  # no handler runs: its parent and seed-1 runs stay RUNNING
    killed.wait()
    killed.stdout.close()
    assert sorted(mlflow_store.statuses(store, experiment="glue").values()) == ["FINISHED", "RUNNING", "RUNNING"]

    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"note: 2 MLflow runs of {tmp_path / 'out'} left RUNNING by a killed invocation now marked KILLED" \
        in out
    ended = sorted((run.info.run_name, run.info.status)
                   for run in mlflow_store.runs(store, experiment="glue"))
    assert ended == [("rte seed 0", "FINISHED"), ("rte seed 1", "FINISHED"), ("rte seed 1", "KILLED"),
                     ("tiny glue", "FINISHED"), ("tiny glue", "KILLED")]


@pytest.mark.slow
def test_a_second_pretrain_into_a_busy_output_is_refused_in_one_line(tmp_path, capsys):
    """Two `harness pretrain` runs into one --output would overwrite each other's checkpoints: the one
    that finds the folder taken exits 2 with one line, the other finishes.

    The first is a real process, paused (SIGSTOP) at its first progress line, so the lock is surely held
    whatever the machine's load, and a few steps suffice; the second runs in this process meanwhile.
    """
    import signal

    corpus = write_corpus(tmp_path / "corpus.txt")

    def pretrain(tracking: str) -> list[str]:
        return ["pretrain", "--preset", "electra-tiny", "--corpus", str(corpus), "--output", str(tmp_path / "out"),
                "--tracking-uri", tracking, "max_steps=4", "log_every_steps=1", "batch_size=4", "seq_len=32",
                "tokenizer=train", "train_vocab_size=200", "precision=fp32", f"cache_dir={tmp_path / 'cache'}"]

    first = start(["-m", "harness.cli", *pretrain("none")], tmp_path)  # tracking apart: only OUT is shared
    seen = ""
    while "pretrain out: step 1 " not in seen:  # in the lock, training
        line = first.stdout.readline()
        assert line, seen
        seen += line
    first.send_signal(signal.SIGSTOP)
    try:
        code = main(pretrain(f"sqlite:///{tmp_path / 'b.db'}"))
    finally:
        first.send_signal(signal.SIGCONT)
    refused = capsys.readouterr().err
    assert code == 2, refused
    assert refused.strip().splitlines()[-1] == (
        f"harness: error: another `harness pretrain` is writing to {str(tmp_path / 'out')!r}; wait for it to "
        "finish (then rerun to resume or extend it) or choose another --output")
    assert len([line for line in refused.splitlines() if line.startswith("harness: error")]) == 1
    assert not (tmp_path / "b.db").exists()  # refused before it opened an MLflow run
    code, output = processes.finish(first, seen)
    assert code == 0, output
    assert json.loads((tmp_path / "out" / "pretrain_meta.json").read_text())["steps"] == 4
