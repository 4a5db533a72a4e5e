"""`harness demo`: the harness's whole story in one command, sized to about half an hour.

Pre-train a small ELECTRA to a fixed FLOPs budget, fine-tune it and an untrained control of the same
shape on GLUE with the ELECTRA recipe (`harness experiment efficiency` with one arm), fine-tune a real
published encoder beside them (harness/experiments/demo_published.py), test the differences (`harness
compare`), write the leaderboard report, export the published encoder's SST-2 model (where the plan has
none, the better arm's) to ONNX (`harness export onnx`) and answer one request with `harness predict`,
torch-free. Every stage
is an existing command's code path, so its outputs are ordinary run directories; rerunning resumes.
The plan depends on the machine: two CPU cores get a tiny model, a GPU a paper-shaped ELECTRA-Small.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from foundation.infra import atomic
from foundation.infra.errors import UserError
from harness.config import load_config
from harness.experiments import demo_published
from harness.experiments.efficiency import (
    Efficiency,
    arm_name,
    diverged_error,
    run_efficiency,
    scored_points,
    stage_count,
)
from pretrain.vocab import shared_dir
from reports.efficiency import CONTROL
from tasks.config import FinetuneConfig
from tasks.registry import parse_tasks

# A plan's stage_s has one entry a stage: these, less "fine-tune published" where it has no published encoder
STAGES = ("pre-train", "fine-tune control", "fine-tune pre-trained", "fine-tune published",
          "compare, export, predict")

# What the demo reports of the pre-trained discriminator where pre-training ended (pretrain/probe.py).
DETECTOR_FIGURES = ("disc_auc", "disc_auc_unigram", "position_cosine")


@dataclass(frozen=True)
class DemoPlan:
    """What the demo runs on one kind of machine, and how long each stage took when measured."""

    machine: str
    preset: str
    budget_flops: float
    tasks: str
    seeds: int
    stage_s: tuple[float, ...]  # expected seconds per STAGES entry
    measured_on: str  # where stage_s comes from
    train_examples: int | None = None  # training examples per task (None: the whole training set)
    pretrain_settings: tuple[str, ...] = ()
    # Test-set prediction feeds only the GLUE server's zip, which a demo does not submit.
    finetune_settings: tuple[str, ...] = ("predict_test=false",)
    export_task: str = "stsb"
    time_frame: str = "the half hour"  # what the subsampled training sets are sized to
    example: tuple[str, ...] = ("A man is playing a guitar.", "A man plays the guitar.")
    # The published encoder (a registry name, Hub id or folder) fine-tuned beside the arms; None: no such act
    published: str | None = None
    published_tasks: str = "sst2,mrpc"
    published_train_examples: int | None = None

    def finetune(self) -> FinetuneConfig:
        return self._finetune(self.train_examples)

    def published_finetune(self) -> FinetuneConfig:
        return self._finetune(self.published_train_examples)

    def _finetune(self, examples: int | None) -> FinetuneConfig:
        sample = (f"max_train_examples={examples}",) if examples else ()
        return load_config(FinetuneConfig, None, [*self.finetune_settings, *sample])

    def data_text(self) -> str:
        if self.train_examples is None:
            return "full training and dev sets"
        return (f"training sets subsampled to {self.train_examples:,} examples each to fit "
                f"{self.time_frame}, a departure from the recipe that the leaderboard marks; full dev sets")


# Half an hour on two CPU cores; why each value: reports/results/demo.md#why-the-plans-are-what-they-are
# precision=fp32, pinned: precision=auto picks bf16 where the CPU has it (AVX512-BF16, AMX), fp32 elsewhere,
# and the two give other figures; pinned, a figure that moves is a change, not the machine.
CPU = DemoPlan("cpu", "electra-tiny", 1e14, "sst2,stsb,rte", 3, (427.0, 515.0, 512.0, 338.0, 10.0),
               "two idle cores of an Intel Xeon in fp32 (a fresh clone, 2026-12-02)", train_examples=1500,
               pretrain_settings=("optimizer=adamw", "max_time_s=900", "precision=fp32"),
               finetune_settings=("predict_test=false", "precision=fp32"),
               published="minilm-l6", published_tasks="sst2,mrpc", published_train_examples=500,
               export_task="sst2", example=("A warm, funny and beautifully acted film.",))
# One ~8-min command of the GPU check; why each value: reports/results/demo.md#why-the-plans-are-what-they-are
GPU = DemoPlan("gpu", "electra-small", 5e15, "stsb,rte,mrpc", 3, (220.0, 110.0, 110.0, 30.0),
               "an H200 (two windows); compare and export estimated", train_examples=1000,
               pretrain_settings=("optimizer=adamw", "max_time_s=240"),  # AdamW: 1% warmup is 39 steps
               finetune_settings=("predict_test=false", "num_epochs=3", "compile=off"),
               time_frame="the GPU window")


@dataclass(frozen=True)
class Demo:
    output_dir: Path
    plan: DemoPlan
    corpus: Path
    data_dir: str
    tracking_uri: str | None = None


def default_inputs(data_dir: str | None, corpus: str | None) -> tuple[str, Path]:
    """The GLUE folder and pre-training corpus: given, else the shared folder's; one error if missing."""
    root = shared_dir()
    glue = Path(data_dir or os.environ.get("GLUE_DIR") or root / "data" / "glue")
    text = Path(corpus) if corpus else root / "data" / "corpus" / "gutenberg"
    missing = [f"{name} {str(path)!r}" for name, path in (("--data-dir", glue), ("--corpus", text))
               if not path.exists()]
    if missing:
        raise UserError(f"{' and '.join(missing)} not found; set SHARED_DIR to the shared data folder "
                        "(with data/glue and data/corpus/gutenberg) or pass --data-dir and --corpus")
    return str(glue), text


def choose_plan(device: str) -> DemoPlan:
    """The GPU plan where torch sees a CUDA device (or `device` says cuda), else the CPU plan."""
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return GPU if device.startswith("cuda") else CPU


class Clock:
    """Stage headlines with the elapsed time and an ETA from the plan's stage times, rescaled by how
    fast the finished stages actually went (a busy machine stretches the rest alike)."""

    KEPT = 0.05  # a stage done in under 5% of its planned time was kept from an earlier run, not run
    PACED_AFTER_S = 60.0  # a minute of pre-training is enough to tell this machine's speed from the plan's

    def __init__(self, plan: DemoPlan):
        self.plan, self.started, self.stage, self.stage_started = plan, time.monotonic(), -1, 0.0
        self.done_expected = self.done_actual = 0.0
        self.paced: float | None = None  # the first stage's measured time over its planned time

    def pace(self, fraction: float, elapsed_s: float) -> None:
        """Pre-training's progress (the share of its budget spent, in elapsed_s): after its first minute,
        say once how long the whole demo will take at the speed measured, not at the plan's."""
        if self.paced is not None or elapsed_s < self.PACED_AFTER_S or not 0 < fraction < 1:
            return
        self.paced = elapsed_s / fraction / self.plan.stage_s[0]
        left = elapsed_s * (1 - fraction) / fraction + self.paced * sum(self.plan.stage_s[1:])
        now = time.monotonic() - self.started
        print(f"demo: pre-training runs at {1 / self.paced:.2f}x the plan's speed here; about "
              f"{_clock(left)} left in all ({_clock(now)} elapsed)", flush=True)

    def __call__(self, headline: str) -> None:
        now = time.monotonic() - self.started
        if self.stage >= 0:
            took, planned = now - self.stage_started, self.plan.stage_s[self.stage]
            if took >= self.KEPT * planned:  # a kept stage says nothing about this machine's speed
                self.done_expected += planned
                self.done_actual += took
        self.stage = min(self.stage + 1, len(self.plan.stage_s) - 1)
        self.stage_started = now
        rate = self.done_actual / self.done_expected if self.done_expected else (self.paced or 1.0)
        left = rate * sum(self.plan.stage_s[self.stage:])
        print(f"{headline}  (demo: {_clock(now)} elapsed, about {_clock(left)} left)", flush=True)


def run_demo(demo: Demo) -> dict:
    """Every stage not already done; the summary that `harness demo` prints (also demo.json)."""
    plan = demo.plan
    clock = Clock(plan)
    published = (f", the published encoder {plan.published} on {plan.published_tasks} "
                 f"({plan.published_train_examples or 'all'} training examples)" if plan.published else "")
    print(f"harness demo: {plan.machine} plan: pre-train {plan.preset} to {plan.budget_flops:g} FLOPs on "
          f"{demo.corpus}, fine-tune it and a random-init control on {plan.tasks} ({plan.data_text()}, "
          f"{plan.seeds} seeds){published}, compare, export, predict; about "
          f"{_clock(sum(plan.stage_s))} on {plan.measured_on}", flush=True)
    exp = Efficiency(
        preset=plan.preset, corpus=(str(demo.corpus),), budgets=(plan.budget_flops,), objectives=("electra",),
        tasks=tuple(parse_tasks(plan.tasks)), output_dir=demo.output_dir, seeds=plan.seeds,
        pretrain_settings=plan.pretrain_settings,
        finetune=plan.finetune(), data_dir=demo.data_dir,
        tracking_uri=demo.tracking_uri, command=f"harness demo --output {demo.output_dir}", announce=clock,
        pace=clock.pace,
        later_stages=2 if plan.published else 1)
    arms = run_efficiency(exp)
    diverged = diverged_error(arms)
    points, unscored = scored_points(arms, [t.name for t in exp.tasks])
    if diverged and unscored:
        raise diverged  # an arm without one whole seed: nothing to compare or export
    last = stage_count(exp)
    pretrained = demo.output_dir / "glue" / arm_name("electra", plan.budget_flops)
    control = demo.output_dir / "glue" / CONTROL
    published = _published(demo, clock, last, [pretrained, control])
    clock(f"[{last}/{last}] compare the models, export "
          f"{'the published encoder' if published else 'the better one'}, predict")
    glue_row, comparison = _compare(pretrained, control)
    # "Better" only where harness compare finds a difference; else the higher median is exported, and
    # the summary says it is not detectably better.
    higher = max(points, key=lambda p: p.glue_median).objective
    verdict = glue_row.get("verdict")
    better = {"A better": "electra", "B better": CONTROL}.get(verdict)
    # With a published act its encoder is the one exported, whichever arm is better
    exported = published.name if published else better or higher
    source = published or (control if exported == CONTROL else pretrained)
    bundle = _export(source, plan.export_task, demo, "int8" if published else None)
    prediction = _predict(bundle, plan.example)
    metrics = next((p.pretrain.get("metrics", {}) for p in points if p.objective != CONTROL), {})
    summary = {"plan": dataclasses.asdict(plan), "wall_time_s": time.monotonic() - clock.started,
               "detector": {k: metrics[k] for k in DETECTOR_FIGURES if k in metrics},
               "better": better, "exported": exported, "glue_verdict": verdict,
               "glue_p_value": glue_row.get("p_value"), "bundle": str(bundle), "prediction": prediction,
               "comparison": comparison, "diverged": str(diverged) if diverged else None,
               "glue_dirs": sorted(str(p.parent) for p in (demo.output_dir / "glue").glob("*/results.json")),
               "published": published and {
                   "model": plan.published, "dir": str(published),
                   "table": demo_published.models_table({"random-init": control, "electra (pre-trained)":
                                                         pretrained, plan.published: published}),
                   "comparison": demo_published.compare_on_common(published, pretrained)}}
    atomic.write_json(demo.output_dir / "demo.json", summary)
    return summary


def _compare(a: Path, b: Path) -> tuple[dict, str]:
    """harness compare's GLUE row and its whole table."""
    from harness.experiments.comparison import GLUE_ROW, compare, load_results_folder, table

    result = compare(load_results_folder(a), load_results_folder(b))
    return next((r for r in result["rows"] if r["task"] == GLUE_ROW), {}), table(result)


def _published(demo: Demo, clock: Clock, last: int, arms: list[Path]) -> Path | None:
    """The published encoder's act (None where the plan has none), and the leaderboard report rewritten
    with its row beside the arms'."""
    plan = demo.plan
    if not plan.published:
        return None
    clock(f"[{last - 1}/{last}] fine-tune the published encoder {plan.published} on {plan.published_tasks} "
          f"x {plan.seeds} seeds ({plan.published_train_examples or 'all'} training examples each)")
    folder = demo_published.finetune(plan, demo.output_dir, demo.data_dir, demo.tracking_uri)
    from harness.tracking.leaderboard_report import write_report

    write_report([*arms, folder], demo.output_dir / "report", demo.tracking_uri)
    return folder


def _export(run_dir: Path, task: str, demo: Demo, quantize: str | None = None) -> Path:
    """The best-dev seed of `task` as an ONNX bundle (int8 beside fp32 where asked); kept when a previous
    run already wrote it."""
    from harness.deploy.bundle_export import ExportJob, export, summary

    bundle = demo.output_dir / "onnx" / f"{run_dir.name}-{task}"
    if (bundle / "manifest.json").is_file():
        print(f"ONNX bundle {bundle}: kept")
    else:
        print(summary(export(ExportJob(task=task, run_dir=run_dir, output=bundle, data_dir=demo.data_dir,
                                       max_eval_examples=500, tracking_uri=demo.tracking_uri,
                                       quantize=quantize))))
    return bundle


def _predict(bundle: Path, texts: tuple[str, ...]) -> dict:
    """One request through `harness predict` in a fresh process: the deployment path, without torch."""
    command = [sys.executable, "-m", "harness.cli", "predict", "--bundle", str(bundle), *texts]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"harness predict failed ({done.stderr.strip().splitlines()[-1:]}); the bundle is "
                        f"{bundle}")
    return {"command": shlex.join(["harness", *command[3:]]),
            "output": json.loads(done.stdout.splitlines()[-1]), "seconds": time.monotonic() - started}


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}:{rest:02d}"
