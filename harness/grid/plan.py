"""A grid's plan, pure functions of what the user gave: the models (repeated --model, globs, @FILE), each
model's run folder, the units (model x task x seed, in a fixed order), a --shard's slice of them, and
which of them results.json already holds (by a single run's resume rule) or records as diverged."""

from __future__ import annotations

import glob
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from harness.finetuning import results_file
from harness.grid.units import Unit
from reports import results_schema

GLOB_CHARACTERS = "*?["
GRID_DIR = "grid"  # beside the models' run folders: the units' specs and logs


def expand_models(values: Sequence[str], reading: tuple[Path, ...] = ()) -> list[str]:
    """Every --model value as models: a glob's matches (sorted), an @FILE's lines (# comments; `reading`:
    the @FILEs this one is listed in), others as given; a glob matching nothing, a missing, unreadable or
    self-including file or a model listed twice is a UserError."""
    models: list[str] = []
    for value in values:
        if value.startswith("@"):
            models += _listed(Path(value[1:]), reading)
        elif any(character in value for character in GLOB_CHARACTERS):
            found = sorted(glob.glob(str(Path(value).expanduser())), key=_natural)
            if not found:
                raise UserError(f"--model {value!r} matches nothing; check the pattern (quote it, so the "
                                "harness, not the shell, expands it)")
            models += found
        else:
            models.append(value)
    seen: dict[str, str] = {}
    for model in models:
        key = _identity(model)
        if key in seen:
            same = "" if seen[key] == model else f" (as {seen[key]!r})"
            raise UserError(f"model {model!r} is listed twice{same}; list each model once")
        seen[key] = model
    return models


def _natural(path: str) -> list:
    """Sort key with numbers by value: step-900 before step-1000, as a pre-training's checkpoints ran."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def _listed(path: Path, reading: tuple[Path, ...]) -> list[str]:
    resolved = path.expanduser().resolve()
    if resolved in reading:
        chain = " -> ".join(f"@{p}" for p in (*reading, resolved))
        raise UserError(f"--model @{path} includes itself ({chain}); list models in it, not the file")
    try:
        lines = path.expanduser().read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise UserError(f"--model @{path}: cannot read the list of models ({error.strerror}); pass a file "
                        "with one model a line") from error
    except UnicodeDecodeError as error:
        raise UserError(f"--model @{path} is not UTF-8 text (byte {error.start}); pass a text file with one "
                        "model a line") from None
    models = [line.split("#", 1)[0].strip() for line in lines]
    if not any(models):
        raise UserError(f"--model @{path} lists no model; write one model a line (# starts a comment)")
    return expand_models([model for model in models if model], (*reading, resolved))


def _identity(model: str) -> str:
    """What makes two --model values one model: the folder it names, else the value."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model.rstrip("/")


def run_names(models: Sequence[str]) -> list[str]:
    """Each model's run folder name: its last part, with as many parts before it as tell two apart
    (runs/a/step-1000 and runs/b/step-1000: a-step-1000, b-step-1000); never the grid's own folder."""
    parts = [[p for p in Path(model.rstrip("/")).parts if p not in ("/", ".", "..")] or [model]
             for model in models]
    depth = [1] * len(models)
    while True:
        names = ["-".join(found[-n:]) for found, n in zip(parts, depth, strict=True)]
        clashes = {name for name in names if names.count(name) > 1 or name == GRID_DIR}
        if not clashes:
            return names
        grown = False
        for index, name in enumerate(names):
            if name in clashes and depth[index] < len(parts[index]):
                depth[index] += 1
                grown = True
        if not grown:  # the same parts all the way up (only a grid folder's name clashes that way)
            return [f"{name}-{index}" if name in clashes else name for index, name in enumerate(names)]


def plan_units(kind: str, models: Sequence[str], output_dirs: Sequence[Path], description: Any,
               settings: Sequence[Any], seeds: int, task_file_dir: Path | None = None,
               gpus: int = 0, search: dict | None = None) -> list[Unit]:
    """Every unit, model by model (as listed), task by task (as described), seed by seed; each takes
    `gpus` GPUs (--gpus-per-unit) and records `search` (--params-from)."""
    first = settings[0].seed
    return [Unit(kind=kind, model=model, task=task, seed=seed, output_dir=output_dir,
                 description=asdict(description.for_task(task)), settings=tuple(asdict(s) for s in settings),
                 task_file_dir=task_file_dir, gpus=gpus, search=search)
            for model, output_dir in zip(models, output_dirs, strict=True)
            for task in description.grid_tasks()
            for seed in range(first, first + seeds)]


def parse_shard(value: str) -> tuple[int, int] | None:
    """--shard K/N as (K, N), None where not given; anything but 1 <= K <= N is a UserError."""
    if not value:
        return None
    k, sep, n = value.partition("/")
    if sep and k.strip().isdigit() and n.strip().isdigit() and 1 <= int(k) <= int(n):
        return int(k), int(n)
    raise UserError(f"--shard {value!r} is no slice; give K/N with 1 <= K <= N, e.g. --shard 1/4 ... 4/4")


def shard(units: Sequence[Unit], slice_: tuple[int, int] | None) -> list[Unit]:
    """The K-th of N slices: every N-th unit from the K-th, so each slice mixes models, tasks and seeds."""
    if slice_ is None:
        return list(units)
    k, n = slice_
    return list(units[k - 1::n])


def finished(units: Sequence[Unit], fresh: Callable[[Unit], tuple[results_schema.ResultsBody, Sequence[str]]]
             ) -> set[str]:
    """The names of the units whose (task, seed) their model's results.json holds (done, or diverged: it
    would diverge again). A run folder that holds any is first held to a single run's resume rule
    (results_file.check_same) against `fresh(unit)`, the body and keys its first unit's run starts from: other
    settings are one UserError, before anything is trained or written."""
    bodies: dict[Path, results_schema.ResultsBody | None] = {}
    done = set()
    for unit in units:
        if unit.output_dir not in bodies:
            # a damaged file is one UserError now, before anything starts
            body = bodies[unit.output_dir] = results_schema.read(unit.output_dir / results_schema.FILE)
            if body is not None:
                results_file.check_same(unit.output_dir, body, *fresh(unit))
        body = bodies[unit.output_dir]
        if body is not None and results_schema.is_done(body, unit.task, unit.seed):
            done.add(unit.name)
    return done


def diverged(units: Sequence[Unit]) -> list[tuple[Unit, results_schema.DivergedRecord]]:
    """The units whose (task, seed) their model's results.json records as diverged, with that record."""
    found = []
    for unit in units:
        body = results_schema.read(unit.output_dir / results_schema.FILE)
        found += [(unit, record) for record in (body or {}).get("diverged", [])
                  if (record["task"], record["seed"]) == (unit.task, unit.seed)]
    return found
