"""`harness pretrain`: the config it builds, a real run logged to MLflow, one-line errors, and the
same command under torchrun with two CPU processes (DDP over gloo)."""

from __future__ import annotations

import collections
import json
import re
import socket
import subprocess
import sys

import pytest

from foundation.models.resolve import resolve_model
from harness.cli import main
from pretrain.config import PretrainConfig, resolve
from tests import mlflow_store
from tests.conftest import MICRO, REPO
from tests.fixtures_processes import mlflow_store_copy
from tests.pretrain_helpers import LAUNCHER, pretrain_args
from tests.processes import child_env


def test_flags_config_file_and_overrides_build_the_config(tmp_path, micro, corpus, monkeypatch, capsys):
    import pretrain.train

    seen = []

    def fake_train(plan, on_log=None):
        seen.append(plan)
        on_log(1, {"progress": 0.5, "generator_loss": 3.0})
        return {"steps": 1, "tokens_seen": 10, "train_flops": 1.0, "wall_time_s": 0.1, "metrics": {}}

    monkeypatch.setattr(pretrain.train, "train", fake_train)
    (tmp_path / "run.toml").write_text('objective = "electra-15"\nlearning_rate = 0.001\nmax_steps = 50\n')
    code = main(pretrain_args(tmp_path, corpus, "--objective", "mlm", "--max-flops", "1e15", "--config",
                         str(tmp_path / "run.toml"), "--corpus", str(corpus), "max_steps=7",
                         "embedding_sharing=gdes"))
    assert code == 0, capsys.readouterr().err
    # the loop gets the settings resolved (the preset's defaults filled), the corpus read, a fresh start
    assert [(plan.config, plan.corpus.files, plan.resume) for plan in seen] == [(resolve(PretrainConfig(
        preset=MICRO.name, corpus=(str(corpus), str(corpus)), output_dir=str(tmp_path / "out"),
        objective="mlm", max_flops=1e15, learning_rate=1e-3, max_steps=7, embedding_sharing="gdes",
        tokenizer="train", train_vocab_size=200, precision="fp32", cache_dir=str(tmp_path / "cache"))),
        (corpus, corpus), None)]


def test_pretrain_end_to_end_logs_to_mlflow(tmp_path, micro, corpus, capsys, monkeypatch):
    from foundation.training import console

    monkeypatch.setattr(console, "_is_terminal", lambda stream: True)  # the bar (tests/test_progress.py: lines)
    code = main(pretrain_args(tmp_path, corpus, "max_steps=6", "log_every_steps=2"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "6 steps" in captured.out
    # The bar shows the budget as a percentage and real rates (it counts thousandths: no "‰/s").
    bar = captured.err.replace("\r", "\n").strip().splitlines()[-1]
    assert "‰" not in captured.err and " 100% of budget |" in bar, bar
    assert re.search(r"\[\d\d:\d\d<00:00, step 6 gen \S+ disc \S+ .* tok/s \S+ steps/s [\d.e+]+\]$", bar), bar
    assert "step 6 " in bar and " tok/s " in bar
    assert resolve_model(str(tmp_path / "out")) == str(tmp_path / "out" / "discriminator")
    (run,) = mlflow_store.runs(tmp_path / "mlflow.db")
    keys = set(run.data.metrics)
    history = mlflow_store.client(tmp_path / "mlflow.db").get_metric_history(run.info.run_id, "generator_loss")
    steps = sorted(entry.step for entry in history)
    assert run.info.status == "FINISHED"
    assert keys >= {"generator_loss", "discriminator_loss", "disc_accuracy_replaced",
                    "disc_accuracy_original", "replaced_fraction", "tokens", "train_flops", "tokens_per_s",
                    "learning_rate"}
    assert steps == [2, 4, 6]


@pytest.mark.slow
def test_a_raised_budget_continues_the_run_and_says_what_it_does_to_the_schedule(tmp_path, micro, corpus,
                                                                                 capsys):
    assert main(pretrain_args(tmp_path, corpus, "max_steps=2")) == 0
    capsys.readouterr()
    code = main(pretrain_args(tmp_path, corpus, "max_steps=4"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.splitlines()[0] == (
        f"note: continuing {tmp_path / 'out'} from step 2 (max_steps: 2 -> 4); the learning rate follows the "
        "schedule over the new budget, so it goes from 0 to 0.001 there, unlike a run started with this "
        "budget (recorded under `extended` in pretrain_meta.json)")
    # then the progress lines (stdout is not a terminal here) and the closing summary
    assert captured.out.splitlines()[1].startswith("pretrain out: step ")
    assert any(line.startswith("4 steps, ") for line in captured.out.splitlines())
    meta = json.loads((tmp_path / "out" / "pretrain_meta.json").read_text())
    assert [(e["at_step"], e["from"], e["to"]) for e in meta["extended"]] == [(2, {"max_steps": 2},
                                                                               {"max_steps": 4})]


def count_calls(monkeypatch, calls: collections.Counter, function) -> None:
    """Count `function`'s calls by every name a loaded module holds it under (`from x import f` too)."""
    def counted(*args, **kwargs):
        calls[function.__name__] += 1
        return function(*args, **kwargs)

    for module in list(sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is function:
                monkeypatch.setattr(module, name, counted)


def test_each_invocation_makes_its_plan_once(tmp_path, micro, corpus, monkeypatch, capsys):
    """Settings resolved, corpus sniffed, resume point (and budget change) found once per invocation."""
    import harness.pretraining.orchestration  # noqa: F401  (its modules loaded: their names are counted too)
    from pretrain import checkpoint, config
    from pretrain.corpus import check_text

    calls = collections.Counter()
    for function in (config.check_runnable, config.resolve, check_text, checkpoint.resume_point,
                     checkpoint.budget_change):
        count_calls(monkeypatch, calls, function)
    seen = []
    for steps in (1, 2):  # a fresh run, then the same run continued to a raised budget
        calls.clear()
        assert main(pretrain_args(tmp_path, corpus, f"max_steps={steps}")) == 0
        seen.append(dict(calls))
    once = {"check_runnable": 1, "resolve": 1, "check_text": 1, "resume_point": 1}
    assert seen == [once, once | {"budget_change": 1}]
    assert capsys.readouterr().out.count("note: continuing") == 1


@pytest.mark.parametrize("extra,message", [
    (["max_steps=5", "warmup=0.1"], "unknown setting 'warmup'"),
    ([], "no budget given"),
    (["--objective", "two-stage", "max_steps=5", "generator_fraction=0.25"], "needs generator_fraction=1"),
    (["max_steps=5", "mask_prob=1.5"], "mask_prob=1.5 must be between 0 and 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, micro, corpus, capsys, extra, message):
    code = main(pretrain_args(tmp_path, corpus, *extra))
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "mlflow.db").exists()  # rejected before an MLflow run was opened
    assert not (tmp_path / "out").exists()  # and before the output lock created OUT


def test_missing_corpus_is_a_user_error(tmp_path, micro, capsys):
    code = main(pretrain_args(tmp_path, tmp_path / "nope.txt", "max_steps=1"))
    assert code == 2 and "corpus path" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["", "\n  \n\n"])
def test_empty_corpus_is_a_user_error(tmp_path, micro, capsys, text):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text(text)
    (tmp_path / "empty" / "b.txt").write_text("")
    code = main(pretrain_args(tmp_path, tmp_path / "empty", "max_steps=1"))
    err = capsys.readouterr().err
    assert code == 2 and err == (f"harness: error: corpus {str(tmp_path / 'empty')!r} holds no text (every "
                                 "file is empty or blank); pass files with one paragraph per line\n")
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("content,reason", [
    (b"PK\x03\x04\x14\x00\x00\x00\x08\x00 a zip archive", "is binary (NUL bytes at offset 5), not text; "
     "remove it from the corpus or pass only text files"),
    ("caf\u00e9 au lait\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 3); convert it to UTF-8 "
     "or remove it from the corpus"),
])
def test_a_corpus_file_that_is_not_utf8_text_is_named(tmp_path, micro, capsys, content, reason):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_text("the cat sat on the mat.\n")
    (tmp_path / "books" / "b.txt").write_bytes(content)
    code = main(pretrain_args(tmp_path, tmp_path / "books", "max_steps=1"))
    err = capsys.readouterr().err
    assert code == 2 and err == f"harness: error: corpus file {str(tmp_path / 'books' / 'b.txt')!r} {reason}\n"
    assert not (tmp_path / "mlflow.db").exists()


def test_a_corpus_smaller_than_a_batch_says_it_repeats(tmp_path, micro, capsys):
    (tmp_path / "one.txt").write_text("the cat sat on mats.\n")
    code = main(pretrain_args(tmp_path, tmp_path / "one.txt", "max_steps=1"))
    out = capsys.readouterr().out
    assert code == 0
    assert ("note: the corpus gives 1 sequence of up to 32 tokens, fewer than a batch (8): every step trains "
            "on the same text repeated; pass a larger corpus for a meaningful run") in out, out


# Slow tier: the only check of DDP (torchrun, two CPU processes over gloo). Slices 1 (plain DDP) is in
# the release tier: slices 2 checks the same parity with one process, through the same DDP wrapping and
# gradient sync, plus no_sync over a step's slices. (One launch for both is not possible: a process
# that left torchrun's process group cannot join it again.)
@pytest.mark.slow
# slices 2: each process's 4 sequences in slices of 2, synced once a step
@pytest.mark.parametrize("slices", [pytest.param(1, marks=pytest.mark.release), 2])
def test_ddp_with_two_cpu_processes_matches_one_process(tmp_path, micro, corpus, capsys, slices, tmp_path_factory):
    mlflow_store_copy(tmp_path_factory, tmp_path / "mlflow.db")  # made once: creating one takes seconds
    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER)
    args = pretrain_args(tmp_path, corpus, "max_steps=4", "batch_size=8", f"gradient_accumulation_steps={slices}",
                         name="ddp")
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                             "--standalone", str(script), *args],
                            cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = json.loads((tmp_path / "ddp" / "pretrain_meta.json").read_text())
    assert ddp["world_size"] == 2 and ddp["steps"] == 4

    assert main(pretrain_args(tmp_path, corpus, "max_steps=4", "batch_size=8", name="single")) == 0
    single = json.loads((tmp_path / "single" / "pretrain_meta.json").read_text())
    # The global batch order does not depend on the process count: same tokens, same FLOPs.
    assert ddp["tokens_seen"] == single["tokens_seen"] and ddp["train_flops"] == single["train_flops"]


def test_a_rerun_ends_killed_the_run_a_dead_process_left_running(tmp_path, micro, corpus, capsys):
    from harness.tracking import mlflow_runs

    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid names no process, as after a kill -9
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_runs.use_experiment("pretrain", uri)
    client = mlflow_store.client(tmp_path / "mlflow.db")
    experiment = client.get_experiment_by_name("pretrain").experiment_id
    left = client.create_run(experiment, run_name="out", tags={
        "output_dir": str(tmp_path / "out"), mlflow_runs.PID_TAG: str(dead.pid), mlflow_runs.HOST_TAG: socket.gethostname()})
    other = client.create_run(experiment, run_name="elsewhere", tags={  # another output: not ours to end
        "output_dir": str(tmp_path / "other"), mlflow_runs.PID_TAG: str(dead.pid),
        mlflow_runs.HOST_TAG: socket.gethostname()})
    assert main(pretrain_args(tmp_path, corpus, "max_steps=2")) == 0
    assert f"note: 1 MLflow run of {tmp_path / 'out'} left RUNNING by a killed invocation now marked KILLED" \
        in capsys.readouterr().out
    assert client.get_run(left.info.run_id).info.status == "KILLED"
    assert client.get_run(other.info.run_id).info.status == "RUNNING"
