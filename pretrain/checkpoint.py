"""Output directory of a pre-training run, and exact resumption.

OUT/discriminator/      ElectraForPreTraining + tokenizer files (safetensors); what fine-tuning loads
OUT/generator/          ElectraForMaskedLM + tokenizer files
OUT/pretrain_meta.json  objective, preset, shapes, tokens seen, train FLOPs, wall time, metrics
OUT/checkpoints/step-N/ the same two model folders and meta, plus training_state.pt: every weight
                        of the run, optimiser, budget counters, data position and each process's RNG,
                        as tensors and plain values only (it loads with weights_only=True)
Every folder and file is written to a temp name, fsynced and renamed into place, so a kill at any
moment leaves the previous checkpoint intact; a resume still checks the newest whole (`damage`) and
falls back to the previous one kept, since a host crash or a full disk can defeat that. A run
resumed with other budgets goes on to them (`budget_change`); any other changed setting is refused.

Objectives without a separate generator (`mlm`) still fill both folders: discriminator/ holds the
trained encoder under an untrained replaced-token head (fine-tuning replaces heads, so
ElectraForSequenceClassification and `harness run glue` load it like any discriminator), and
generator/ holds the same encoder with its trained MLM head. replace-mlm keeps its main MLM head
only in training_state.pt. pretrain_meta.json says which heads were trained.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import shutil
import zipfile
from pathlib import Path

import torch

from foundation.infra import atomic
from foundation.infra.atomic import atomic_dir, save_pretrained, write_bytes
from foundation.infra.errors import UserError
from foundation.models import checkpoint_check, layout, pretrain_meta
from foundation.models.layout import DISCRIMINATOR_DIR, GENERATOR_DIR, PRETRAIN_META
from foundation.models.pretrain_meta import BudgetChange, PretrainMeta
from foundation.training import stop
from foundation.training.quiet import quiet_transformers
from foundation.training.rng import restore_rng, rng_state  # noqa: F401  (the loop's ckpt.rng_state)
from pretrain.budget import BudgetCounters, budget_fraction, learning_rate, schedule_fraction, stage_fraction
from pretrain.config import BUDGETS, PretrainConfig, config_differences

STATE_FILE = "training_state.pt"
# 2: only tensors and plain Python values, so it loads with torch.load(weights_only=True); 1 (no
# "format" key) held numpy arrays and needed weights_only=False, which runs whatever a pickle names.
STATE_FORMAT = 2
CHECKPOINTS = "checkpoints"
_STEP_DIR = re.compile(r"step-(\d+)$")


def checkpoints(out: Path) -> list[Path]:
    """OUT's step-N folders, oldest first; `damage` says which of them a run can go on from."""
    folder = out / CHECKPOINTS
    found = [p for p in folder.iterdir() if _STEP_DIR.match(p.name) and p.is_dir()] if folder.is_dir() else []
    return sorted(found, key=_step)


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run goes on from, and how this invocation's budgets differ from its own."""

    folder: Path
    budget_change: BudgetChange | None  # budget_change(folder, config): None when the budgets are the same
    skipped: tuple[str, ...] = ()  # newer checkpoints found damaged and passed over, each in one line

    @property
    def step(self) -> int:
        return _step(self.folder)


def resume_point(out: Path, config: PretrainConfig) -> ResumePoint | None:
    """The checkpoint to resume from, None for a fresh run, or a UserError if OUT is not ours.

    The newest step-N is checked whole (damage) before it is trusted: a host crash or a full disk can
    leave it short or empty. A damaged one is passed over for the previous one that keep_checkpoints
    kept (ResumePoint.skipped says so); with none whole left, a UserError names the newest's damage.
    """
    atomic.recover_all(out / CHECKPOINTS)  # folders a kill between a replace's two renames left aside
    atomic.recover_all(out)
    found = checkpoints(out)
    if not found:
        leftovers = [p.name for p in out.iterdir() if not p.name.startswith(".")] if out.is_dir() else []
        if leftovers:
            raise UserError(f"output directory {str(out)!r} already holds {', '.join(sorted(leftovers)[:5])} "
                            "but no pre-training checkpoint; choose a new --output or empty it")
        return None
    skipped = []
    for folder in reversed(found):
        problem = damage(folder)
        if problem is None:
            break
        skipped.append(f"checkpoint {str(folder)!r} is damaged ({problem})")
    else:
        which = "the only checkpoint" if len(found) == 1 else f"none of its {len(found)} checkpoints is whole"
        raise UserError(f"{str(out)!r} cannot be resumed: {which}; {skipped[0]}; delete "
                        f"{str(out / CHECKPOINTS)!r} to start that run afresh, or choose a new --output")
    saved = pretrain_meta.read(folder / PRETRAIN_META)["config"]
    differences = config_differences(saved, config, may_change=BUDGETS)
    if differences:
        raise UserError(f"{str(out)!r} holds a run with other settings ({'; '.join(differences)}); "
                        "resume it with the same settings (the budgets may change) or choose a new --output")
    # budget_change refuses budgets it cannot go on to
    return ResumePoint(folder, budget_change(folder, config), tuple(skipped))


def damage(folder: Path) -> str | None:
    """What makes a step-N folder unusable for a resume, in a few words, or None if it is whole.

    Cheap next to the resume itself: the meta parsed, training_state.pt's zip checked member by member
    against its CRCs (what torch.save writes; a short file has no zip directory), and the model folders'
    safetensors headers against their sizes; nothing is unpickled here.
    """
    meta_path = folder / PRETRAIN_META
    try:
        meta = pretrain_meta.read(meta_path)
    except UserError:
        return f"{PRETRAIN_META} is not readable JSON"
    wanted = {"config": dict, "steps": int, "tokens_seen": int, "train_flops": (int, float),
              "wall_time_s": (int, float)}
    if not isinstance(meta, dict) or \
            any(not isinstance(meta.get(key), expected) for key, expected in wanted.items()):
        return f"{PRETRAIN_META} lacks the run's config or counters"
    state = folder / STATE_FILE
    if not state.is_file():
        return f"no {STATE_FILE}"
    try:
        with zipfile.ZipFile(state) as archive:
            broken = archive.testzip()  # reads every member, checks its CRC
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return f"{STATE_FILE} is cut short or not a torch.save file ({state.stat().st_size} bytes)"
    if broken is not None:
        return f"{STATE_FILE} member {broken!r} fails its CRC"
    for name in (DISCRIMINATOR_DIR, GENERATOR_DIR):
        model = folder / name
        if name == DISCRIMINATOR_DIR or model.exists():  # every objective writes discriminator/
            try:
                checkpoint_check.weight_shapes(layout.checkpoint_dir(model))
            except UserError:
                return f"{name}/ lacks its config or weights, or they are cut short"
    return None


def budget_change(checkpoint: Path, config: PretrainConfig) -> BudgetChange | None:
    """How config's budgets differ from the checkpoint's, or None; a UserError if the run cannot go on.

    The schedule is a function of the fraction of the budget used (ELECTRA's linear decay to the
    budget's end), so a run continued to another budget follows the schedule over the new budget from
    the fraction it has reached: a finished run's rate, decayed to 0, jumps back up. The record keeps
    both rates; the result is not what a run started with the new budget would give.
    """
    meta = pretrain_meta.read(checkpoint / PRETRAIN_META)
    old = {key: meta["config"].get(key) for key in BUDGETS}
    changed = [key for key in BUDGETS if old[key] != getattr(config, key)]
    if not changed:
        return None
    counters = BudgetCounters(step=meta["steps"], tokens=meta["tokens_seen"], flops=meta["train_flops"],
                              elapsed_s=meta["wall_time_s"], stage=meta.get("stage", 1))
    out = str(checkpoint.parent.parent)
    spent = [f"{key}={budget_value(getattr(config, key))}" for key in BUDGETS
             if getattr(config, key) is not None and budget_fraction(_only(config, key), counters) >= 1]
    if spent:
        one = len(spent) == 1
        raise UserError(f"{out!r} holds a run at step {counters.step}, where {' and '.join(spent)} "
                        f"{'is' if one else 'are'} already spent; raise {'it' if one else 'them'} to "
                        "continue that run, or choose a new --output")
    fraction = schedule_fraction(config, counters)
    if config.objective == "two-stage" and counters.stage == 2 and fraction < config.two_stage_switch:
        raise UserError(f"{out!r} holds a two-stage run past its switch to the discriminator (step "
                        f"{counters.step}); the new budget would put the switch (two_stage_switch="
                        f"{config.two_stage_switch} of it) after that step; choose a smaller budget or a "
                        "new --output")
    before = dataclasses.replace(config, **old)
    return BudgetChange({"at_step": counters.step, "from": {key: old[key] for key in changed},
                         "to": {key: getattr(config, key) for key in changed},
                         "learning_rate_before": _rate(before, counters),
                         "learning_rate_after": _rate(config, counters)})


def extensions(resume: ResumePoint) -> list[BudgetChange]:
    """The run's budget changes so far (pretrain_meta.json `extended`), with this one if any."""
    earlier = pretrain_meta.read(resume.folder / PRETRAIN_META).get("extended", [])
    return earlier + ([resume.budget_change] if resume.budget_change else [])


def budget_value(value: float | None) -> str:
    """'2e+15' for FLOPs and seconds, a count in full ('1000'), or 'None'."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _only(config: PretrainConfig, budget: str) -> PretrainConfig:
    return dataclasses.replace(config, **{key: None for key in BUDGETS if key != budget})


def _rate(config: PretrainConfig, counters: BudgetCounters) -> float:
    """The learning rate of the next step under config's budgets."""
    return learning_rate(config, stage_fraction(config, schedule_fraction(config, counters), counters.stage))


def finished_meta(out: Path, config: PretrainConfig) -> PretrainMeta | None:
    """OUT's pretrain_meta.json if OUT holds a finished run of these (resolved) settings, else None."""
    path = out / PRETRAIN_META
    if not path.is_file():  # published only when a run ends
        return None
    meta = pretrain_meta.read(path)
    return None if config_differences(meta["config"], config) else meta


def load_state(checkpoint: Path) -> dict:
    """Everything `write_checkpoint` saved, read with weights_only=True: a pickle naming code is refused."""
    path = checkpoint / STATE_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(f"{str(path)!r} is in an old checkpoint format (or not ours): reading it would need "
                        "full unpickling, which can run code, so it is not resumed; finish that run with "
                        "the harness version that wrote it, or start a new --output") from error
    except Exception as error:  # torch's reader raises RuntimeError, EOFError, ... for a damaged file
        raise UserError(f"{str(path)!r} cannot be read ({type(error).__name__}: {_first_line(error)}); "
                        "delete its folder to resume from the checkpoint before it, or start a new --output"
                        ) from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise UserError(f"{str(path)!r} is not a format-{STATE_FORMAT} training state; start a new --output")
    return state


def write_checkpoint(out: Path, step: int, state: dict, export, meta: PretrainMeta, keep: int) -> Path:
    """Save step-N atomically (`export(folder)` writes the model folders), then prune old ones."""
    target = out / CHECKPOINTS / f"step-{step}"
    with atomic_dir(target) as tmp:
        export(tmp)
        torch.save({"format": STATE_FORMAT, **state}, tmp / STATE_FILE)
        pretrain_meta.write(tmp / PRETRAIN_META, meta)
    # Newer ones are those a resume passed over as damaged: this run has gone on from an older one.
    found = checkpoints(out)
    for old in [p for p in found if _step(p) > step] + [p for p in found if _step(p) <= step][:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _step(folder: Path) -> int:
    return int(_STEP_DIR.match(folder.name).group(1))


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:200]


def stop_here(out: Path, step: int) -> None:
    """Once a signal's checkpoint of `step` is written: raise the Stopped that the CLI prints."""
    raise stop.stopped(f"at step {step}; its checkpoint is {str(out / CHECKPOINTS / f'step-{step}')!r}")


def export_models(folder: Path, discriminator, generator, tokenizer) -> None:
    """discriminator/ and generator/ as `save_pretrained` folders with the tokenizer beside them."""
    with quiet_transformers(reports=False):
        for name, model in ((DISCRIMINATOR_DIR, discriminator), (GENERATOR_DIR, generator)):
            if model is not None:
                save_pretrained(folder / name, model, tokenizer)


def publish(out: Path, checkpoint: Path) -> None:
    """Make a checkpoint's model folders and meta the run's top-level result, atomically."""
    for name in (DISCRIMINATOR_DIR, GENERATOR_DIR):
        if (checkpoint / name).is_dir():
            with atomic_dir(out / name) as tmp:
                shutil.copytree(checkpoint / name, tmp, dirs_exist_ok=True)
    write_bytes(out / PRETRAIN_META, (checkpoint / PRETRAIN_META).read_bytes())
