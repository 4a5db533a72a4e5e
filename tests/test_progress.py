"""Progress off a terminal (a batch job's log): plain lines with step, loss, rate, ETA and dev scores,
and no library bars; a terminal keeps the bars. Under pytest stdout is not a terminal."""

from __future__ import annotations

import io
import re

import transformers

from foundation.training import console
from harness.cli import main
from harness.pretraining.orchestration import run_pretrain
from tasks import batching, glue
from tasks.config import FinetuneConfig
from tasks.finetune import LoopIO, finetune
from tasks.glue_data import load_glue
from tasks.registry import GLUE_TASKS
from tests.conftest import glue_args
from tests.pretrain_helpers import micro_config

BAR_TEXT = ("%|", "tokenize", "Loading weights", "Writing model shards", "of budget |")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_rule_for_bar_lines_or_nothing(monkeypatch):
    assert console.progress_mode(None) == "lines"  # pytest's captured stdout: a log file, say
    assert (console.progress_mode(True), console.progress_mode(False)) == ("bar", "off")
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert console.progress_mode(None) == "lines"  # stderr, where the bar draws, is still captured
    monkeypatch.setattr("sys.stderr", _Terminal())
    assert console.progress_mode(None) == "bar"


def test_durations_and_eta_are_short():
    assert [console.duration(s) for s in (0, 12.4, 200, 7500)] == ["0s", "12s", "3m20s", "2h05m"]
    assert console.eta(25, 100, 10.0) == "30s" and console.eta(0, 100, 0.0) == "?"


def test_clock_gives_a_line_at_once_then_once_per_interval(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(console.time, "monotonic", lambda: now[0])
    clock = console.LineClock(every_s=30.0)
    due = []
    for t in (100.0, 110.0, 129.9, 130.0, 140.0, 160.0):
        now[0] = t
        due.append(clock.due())
    assert due == [True, False, False, True, False, True]


def test_finetune_prints_step_and_epoch_lines_with_dev_scores(tiny_model, glue_data, capsys, monkeypatch):
    import tasks.finetune

    monkeypatch.setattr(tasks.finetune, "LOG_EVERY_STEPS", 2)  # 16 examples, batch 4: 4 steps an epoch
    task = GLUE_TASKS["rte"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue.build_task(task, load_glue(task, glue_data), tokenizer, max_length=32)
    config = FinetuneConfig(precision="fp32", batch_size=4, num_epochs=2).resolved("small", 1)
    transformers.set_seed(0)
    capsys.readouterr()
    result = finetune(glue.load_model(str(tiny_model), task, attn_implementation="eager"), built, config,
                      batching.collator(tokenizer), LoopIO(label="fine-tune rte seed 0"))
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith("fine-tune rte seed 0: ")]
    number, rate = r"\d+\.\d{4}", r"\d+\.\d ex/s eta (\d+s|\d+m\d\ds|\?)"
    # The first due line at step 2; steps 4 and 6 fall within the 30 s; every epoch's end has its line.
    assert len(lines) == 3, out
    assert re.fullmatch(rf"fine-tune rte seed 0: step 2/8 epoch 1/2 loss {number} {rate}", lines[0])
    for line, epoch, row in zip(lines[1:], (1, 2), result.history, strict=True):
        dev = f"validation accuracy {row['validation_accuracy']:.4f} validation score {row['validation_score']:.4f}"
        assert re.fullmatch(rf"fine-tune rte seed 0: step {4 * epoch}/8 epoch {epoch}/2 "
                            rf"loss {row['train_loss']:.4f} {rate} \| dev {dev}", line), line
    assert lines[-1].split(" eta ")[1].startswith("0s |")
    assert not any(text in err for text in BAR_TEXT), err


def test_glue_run_off_a_terminal_prints_lines_and_no_library_bars(tiny_model, glue_data, tmp_path, capsys):
    capsys.readouterr()  # the fixture's own save output
    code = main(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1", "batch_size=4",
                          "precision=fp32"))  # saves the model: transformers' shard bar would show
    out, err = capsys.readouterr()
    assert code == 0, err
    assert re.search(r"^fine-tune rte seed 0: step 4/4 epoch 1/1 loss \d+\.\d{4} \d+\.\d ex/s eta 0s \| "
                     r"dev validation accuracy \d\.\d{4}", out, re.MULTILINE), out
    assert not any(text in err for text in BAR_TEXT), err


def test_pretrain_off_a_terminal_prints_lines_not_a_bar(tmp_path, micro, corpus, capsys):
    meta = run_pretrain(micro_config(tmp_path, corpus, max_steps=10, log_every_steps=5),
                        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith("pretrain out: ")]
    value = r"[\d.e+-]+"
    metrics = rf"gen {value} disc {value} acc_repl {value} acc_orig {value} tok/s {value} steps/s {value}"
    # Step 5 is the first log (a line at once); step 10 ends the budget (a line whatever the clock).
    assert len(lines) == 2, out
    assert re.fullmatch(rf"pretrain out: step 5 {metrics} budget 50% eta (\d+s|\d+m\d\ds)", lines[0]), lines[0]
    assert re.fullmatch(rf"pretrain out: step 10 {metrics} budget 100% eta 0s", lines[1]), lines[1]
    assert meta["steps"] == 10
    assert not any(text in err for text in BAR_TEXT), err
