"""`harness experiment efficiency`: pre-training objectives against each other at equal FLOPs.

Every arm is an objective pre-trained at a FLOPs budget from the same corpus, tokenizer, preset and
settings, then fine-tuned on the same GLUE tasks with the same recipe and seeds; a random-init
discriminator of the same shape and tokenizer is the control. Only existing commands do the work
(`harness pretrain`, `harness init`, `harness run glue`, `harness report`), so every arm is an
ordinary run directory and MLflow run. Layout of OUT:

    experiment.json           the fixed settings; a rerun must match them (budgets, objectives,
                              tasks and seeds may change)
    pretrain/OBJECTIVE-BUDGET `harness pretrain` outputs (a killed one resumes from its checkpoint)
    random-init/              the control
    glue/ARM/                 `harness run glue` outputs (finished task x seed pairs are kept)
    efficiency.{md,csv,png}   GLUE score against pre-training FLOPs, rewritten after every arm
    report/                   the `harness report` leaderboard of the arms
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.infra import atomic
from foundation.infra.errors import UserError
from foundation.models.layout import DISCRIMINATOR_DIR
from foundation.models.pretrain_meta import PretrainMeta
from foundation.training.quiet import quiet_libraries
from harness import kinds
from harness.config import as_dict, load_config
from harness.finetuning import records, results_file
from harness.finetuning.kind_runner import Job, KindRunner
from pretrain.config import PretrainConfig, resolve
from reports import efficiency
from reports.efficiency import CONTROL, Arm
from tasks.config import FinetuneConfig
from tasks.registry import GlueTask

MANIFEST = "experiment.json"
FORMAT = "electra-harness/efficiency-experiment/1"


@dataclass(frozen=True)
class Efficiency:
    """One experiment: which arms, which tasks and seeds, and the settings they all share."""

    preset: str
    corpus: tuple[str, ...]
    budgets: tuple[float, ...]  # pre-training FLOPs, paper convention
    objectives: tuple[str, ...]
    tasks: tuple[GlueTask, ...]
    output_dir: Path
    seeds: int = 3
    pretrain_settings: tuple[str, ...] = ()  # key=value for every pre-training run
    finetune: FinetuneConfig = FinetuneConfig()
    data_dir: str | None = None
    control: bool = True
    tracking_uri: str | None = None
    command: str = ""  # as typed, recorded for the reader
    # prints each stage's headline; `harness demo` adds its elapsed time and ETA
    announce: Callable[[str], None] = print
    later_stages: int = 0  # stages a caller runs after these (the demo's compare/export/predict)
    # pre-training's progress as (share of the budget spent, elapsed s): `harness demo`'s ETA from the pace
    pace: Callable[[float, float], None] | None = None
    # (GridSettings, Executor) from a grid flag: the arms' fine-tunings as one grid
    # (harness/experiments/efficiency_grid.py); None: each in this process after its pre-training
    pool: tuple[Any, Any] | None = None


def stage_count(exp: Efficiency) -> int:
    """Stages numbered [i/N]: each pre-training and each arm's fine-tuning (through a grid: one for all),
    then the caller's own."""
    pretrainings = len(set(exp.budgets)) * len(set(exp.objectives))
    if exp.pool is not None:
        return pretrainings + 1 + exp.later_stages
    return 2 * pretrainings + exp.control + exp.later_stages


def arm_name(objective: str, budget: float) -> str:
    return f"{objective}-{budget:g}"


def pretrain_configs(exp: Efficiency) -> dict[tuple[str, float], PretrainConfig]:
    """Each arm's resolved pre-training config, smallest budget first; all bad settings in one error."""
    if not exp.budgets or not all(0 < b < float("inf") for b in exp.budgets):  # nan too
        raise UserError(f"--budget-flops needs positive FLOPs counts (got {exp.budgets}); e.g. 1e14,4e14")
    if not exp.objectives:
        raise UserError("--objectives is empty; name at least one, e.g. electra,mlm")
    if exp.seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {exp.seeds})")
    reserved = [s for s in exp.pretrain_settings if s.partition("=")[0].strip() in ("max_flops", "objective")]
    if reserved:
        raise UserError(f"{', '.join(reserved)}: the experiment sets budgets and objectives itself; use "
                        "--budget-flops and --objectives")
    return {(objective, budget): resolve(load_config(
        PretrainConfig, None, list(exp.pretrain_settings), preset=exp.preset, corpus=exp.corpus,
        objective=objective, max_flops=budget,
        output_dir=str(exp.output_dir / "pretrain" / arm_name(objective, budget))))
        for budget in sorted(set(exp.budgets)) for objective in dict.fromkeys(exp.objectives)}


@quiet_libraries()  # the runs' own bars or lines cover tokenising, loading and saving
def run_efficiency(exp: Efficiency, progress: bool | None = None) -> list[Arm]:
    """Pre-train, fine-tune and tabulate every arm not already done; the arms (see diverged_error)."""
    configs = pretrain_configs(exp)
    _glue_runner().check_data(_glue_job(exp))  # bad GLUE data fails now, not after pre-training
    _check_manifest(exp)
    total = stage_count(exp)
    numbers = iter(range(1, total + 1))

    def stage() -> str:
        return f"[{next(numbers)}/{total}]"

    if exp.pool is None:
        arms = _arms_in_turn(exp, configs, stage, progress)
    else:
        arms = _arms_through_grid(exp, configs, stage, progress)
        _write_tables(exp, arms)
    from harness.tracking.leaderboard_report import write_report

    write_report([exp.output_dir / "glue" / name for name in _glue_dirs(arms)], exp.output_dir / "report",
                 exp.tracking_uri)
    return arms


def _arms_in_turn(exp: Efficiency, configs: dict[tuple[str, float], PretrainConfig], stage: Callable[[], str],
                  progress: bool | None) -> list[Arm]:
    """Each arm pre-trained, then fine-tuned in this process (the control after the first), the tables
    rewritten after each."""
    arms: list[Arm] = []
    for (objective, budget), config in configs.items():
        meta = _pretrained(config, stage(), exp.tracking_uri, exp.announce, progress, exp.pace)
        if exp.control and not any(a.objective == CONTROL for a in arms):
            like = Path(config.output_dir) / DISCRIMINATOR_DIR
            arms.append(_control(exp, like, progress, stage()))
            _write_tables(exp, arms)
        exp.announce(f"{stage()} fine-tune {arm_name(objective, budget)} on "
                     f"{','.join(t.name for t in exp.tasks)} x {exp.seeds} seeds")
        results = _finetune(exp, config.output_dir, arm_name(objective, budget), progress)
        arms.append(Arm(objective, budget, meta["train_flops"], results, _pretrain_summary(meta)))
        _write_tables(exp, arms)
    return arms


def _arms_through_grid(exp: Efficiency, configs: dict[tuple[str, float], PretrainConfig],
                       stage: Callable[[], str], progress: bool | None) -> list[Arm]:
    """Every arm pre-trained, then all of them (the control first) fine-tuned as one grid."""
    from harness.experiments.efficiency_grid import finetune_arms

    metas = {arm_name(o, b): (o, b, config.output_dir, _pretrained(config, stage(), exp.tracking_uri,
                                                                   exp.announce, progress, exp.pace))
             for (o, b), config in configs.items()}
    models = {name: folder for name, (_, _, folder, _) in metas.items()}
    if exp.control:
        like = Path(next(iter(models.values()))) / DISCRIMINATOR_DIR
        models = {CONTROL: str(control_folder(exp, like))} | models
    exp.announce(f"{stage()} fine-tune {len(models)} arms on {','.join(t.name for t in exp.tasks)} x "
                 f"{exp.seeds} seeds through the grid")
    bodies = finetune_arms(exp, _glue_job(exp), models)
    arms = [Arm(CONTROL, 0.0, 0.0, bodies[CONTROL])] if exp.control else []
    return arms + [Arm(o, b, meta["train_flops"], bodies[name], _pretrain_summary(meta))
                   for name, (o, b, _, meta) in metas.items()]


def diverged_error(arms: list[Arm]) -> UserError | None:
    """One line naming every arm's diverged tasks and seeds and the fix, or None when none diverged."""
    diverged = [record | {"task": f"{name} {record['task']}"}  # "ARM TASK"
                for name, arm in zip(_glue_dirs(arms), arms, strict=True)
                for record in arm.results.get("diverged") or []]
    return records.diverged_error(diverged, "glue/ARM/results.json", "the tables",
                                  "re-run with a lower finetune.learning_rate into a new --output")


def _pretrained(config: PretrainConfig, step: str, tracking_uri: str | None,
                announce: Callable[[str], None], progress: bool | None,
                pace: Callable[[float, float], None] | None = None) -> PretrainMeta:
    """The finished run's meta: kept if OUT already holds it, else trained (or resumed) now."""
    from harness.pretraining.orchestration import run_pretrain, time_stop_note
    from pretrain.checkpoint import finished_meta

    out = Path(config.output_dir)
    meta = finished_meta(out, config)
    if meta is not None:
        announce(f"{step} pre-trained {out.name}: kept ({meta['steps']} steps, "
                 f"{meta['train_flops']:.3g} FLOPs)")
        note = time_stop_note(meta, out)
        if note:
            announce(note)
        return meta
    announce(f"{step} pre-train {config.objective} to {config.max_flops:g} FLOPs -> {out}")
    return run_pretrain(config, tracking_uri=tracking_uri, progress=progress, pace=pace)


def _control(exp: Efficiency, like: Path, progress, stage: str) -> Arm:
    """The untrained control: `like`'s config and tokenizer, fresh weights; then fine-tuned."""
    folder = control_folder(exp, like)
    exp.announce(f"{stage} fine-tune {CONTROL} (no pre-training) x {exp.seeds} seeds")
    return Arm(CONTROL, 0.0, 0.0, _finetune(exp, str(folder), CONTROL, progress))


def _finetune(exp: Efficiency, model: str, name: str, progress) -> dict:
    return _glue_runner().run(_glue_job(exp, model, name, progress))


def control_folder(exp: Efficiency, like: Path) -> Path:
    """OUT/random-init: `like`'s config and tokenizer with fresh weights (kept once written)."""
    import transformers

    from foundation.models.layout import has_weights
    from pretrain.random_init import write_random_init

    folder = exp.output_dir / CONTROL
    if not has_weights(folder):
        tokenizer = transformers.AutoTokenizer.from_pretrained(like)
        write_random_init(transformers.AutoConfig.from_pretrained(like), tokenizer, folder, seed=0)
    return folder


def _glue_runner() -> KindRunner:
    """GLUE's runner (harness/finetuning/kind_runner.py), through the registry of kinds."""
    return kinds.load(kinds.KINDS["glue"].runner)


def _glue_job(exp: Efficiency, model: str = "", name: str = "", progress: bool | None = None) -> Job:
    """The experiment's GLUE tasks, fine-tuned from `model` into glue/NAME (a data check needs neither)."""
    glue = kinds.load(kinds.KINDS["glue"].description)
    description = glue(tasks=",".join(task.name for task in exp.tasks), data_dir=exp.data_dir or "")
    # leaderboard=False: write_report adds the arms itself
    return Job(model=model, description=description, settings=(exp.finetune,),
               output_dir=exp.output_dir / "glue" / name, seeds=exp.seeds, tracking_uri=exp.tracking_uri,
               leaderboard=False, progress=progress)


def _glue_dirs(arms: list[Arm]) -> list[str]:
    return [CONTROL if a.objective == CONTROL else arm_name(a.objective, a.budget_flops) for a in arms]


def _pretrain_summary(meta: PretrainMeta) -> dict:
    keys = ("steps", "tokens_seen", "wall_time_s", "train_flops")
    # stopped_by / schedule_completed say whether a time stop cut the budget short (absent before them)
    return {k: meta[k] for k in keys} | {"metrics": meta.get("metrics", {}),
                                         "stopped_by": meta.get("stopped_by"),
                                         "schedule_completed": meta.get("schedule_completed")}


def scored_points(arms: list[Arm], tasks: list[str]) -> tuple[list[efficiency.Point], list[str]]:
    """The table's points, and the names of arms without a GLUE score (every seed of some task diverged,
    so no seed finished every task), which are left out of it."""
    named = list(zip(_glue_dirs(arms), arms, strict=True))
    unscored = [name for name, arm in named if not efficiency.seed_scores(arm.results, tasks)]
    return [efficiency.point(arm, tasks) for name, arm in named if name not in unscored], unscored


def _write_tables(exp: Efficiency, arms: list[Arm]) -> None:
    tasks = [t.name for t in exp.tasks]
    points, unscored = scored_points(arms, tasks)  # the unscored are named under the table
    note = "" if not unscored else \
        f"\nNo GLUE score (no seed finished every task; see glue/ARM/results.json): {', '.join(unscored)}\n"
    title = f"{exp.preset}: GLUE ({', '.join(tasks)}) vs pre-training FLOPs"
    comparisons = _comparisons(exp, arms)
    atomic.write_text(exp.output_dir / "efficiency.md",
                      efficiency.markdown(points, tasks) + note + efficiency.significance(comparisons))
    atomic.write_text(exp.output_dir / "efficiency.csv", efficiency.to_csv(points, tasks))
    atomic.write_bytes(exp.output_dir / "efficiency.png", efficiency.plot_png(points, title))
    atomic.write_json(exp.output_dir / "efficiency.json", {
        "format": FORMAT, "command": exp.command, "tasks": tasks, "seeds": exp.seeds,
        "arms": [dataclasses.asdict(p) for p in points], "comparisons": comparisons})


def _comparisons(exp: Efficiency, arms: list[Arm]) -> list[dict]:
    """At each budget, the leading objective (electra, else the first) against every other arm there
    and against the control, by `harness compare` on their run directories."""
    from harness.experiments.comparison import GLUE_ROW, compare, load_results_folder

    leader = "electra" if "electra" in exp.objectives else exp.objectives[0]
    named = list(zip(_glue_dirs(arms), arms, strict=True))  # Arm holds dicts: not hashable
    found = []
    for name, arm in ((n, a) for n, a in named if a.objective == leader):
        others = [n for n, a in named if a.objective == CONTROL or
                  (a.budget_flops == arm.budget_flops and a.objective != leader)]
        for other in others:
            entry = {"a": name, "b": other, "budget_flops": arm.budget_flops}
            try:
                result = compare(load_results_folder(exp.output_dir / "glue" / name),
                                 load_results_folder(exp.output_dir / "glue" / other))
                entry["row"] = next(r for r in result["rows"] if r["task"] == GLUE_ROW)
            except UserError as error:  # e.g. runs fine-tuned before per-seed dev outputs were written
                entry["error"] = str(error)
            found.append(entry)
    return found


def _fixed_settings(exp: Efficiency) -> dict:
    """What every arm shares; changing any of it would make the arms incomparable."""
    return {"format": FORMAT, "preset": exp.preset, "corpus": [str(Path(c).resolve()) for c in exp.corpus],
            "pretrain_settings": sorted(exp.pretrain_settings), "finetune": as_dict(exp.finetune),
            "data_dir": _resolved(exp.data_dir)}


def _resolved(data_dir: str | None) -> str | None:
    """A local data folder as an absolute path, so `../shared/data/glue` and `/work/shared/data/glue`
    match (as `harness demo` records it); None (the Hub) as it is."""
    return str(Path(data_dir).resolve()) if data_dir else data_dir


def _check_manifest(exp: Efficiency) -> None:
    """Write OUT/experiment.json, or refuse a rerun whose shared settings differ from the first."""
    path = exp.output_dir / MANIFEST
    fixed = _fixed_settings(exp)
    if path.is_file():
        saved = json.loads(path.read_text()).get("fixed", {})
        saved["data_dir"] = _resolved(saved.get("data_dir"))  # manifests written before it was resolved
        changed = [key for key in fixed if key != "finetune" and saved.get(key) != fixed[key]]
        # fine-tuning settings by the resume rule of its results.json (a key absent: its value before it)
        finetune = results_file.shown(results_file.block_differences("config", saved.get("finetune") or {},
                                                                      fixed["finetune"]))
        if finetune:
            changed.append(f"finetune ({'; '.join(finetune)})")
        if changed:
            raise UserError(f"{str(exp.output_dir)!r} holds an experiment with other {', '.join(changed)}; "
                            "rerun it with the same settings or pass a new --output")
    atomic.write_json(path, {"fixed": fixed, "command": exp.command})
