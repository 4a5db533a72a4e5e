"""results.json of a run directory that several invocations may write at once.

A user runs seeds side by side into one --output-dir (`seed=0` and `seed=1` in two shells). Each
invocation holds its own records in memory, so a plain write would keep only the last writer's seeds.
Every write therefore reads the file under a lock beside it, adds the (task, seed) records that other
invocations wrote, and writes the union; the summary is computed inside the same lock, so the last
invocation to finish summarises every seed. Invocations with other settings are refused in one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from filelock import FileLock

from foundation.infra import settings
from foundation.infra.errors import UserError
from reports.results_schema import FILE, RECORDS, ResultsBody, read, write
from tasks.config import FinetuneConfig, SquadConfig, head_for
from tasks.task_files import SPLIT_FILES


class ResultsFile:
    """OUT/results.json, merged with other invocations' records on every write."""

    def __init__(self, output_dir: Path, started: float, same: Sequence[str] = ("format", "config")):
        self.output_dir = Path(output_dir)
        self.path = self.output_dir / FILE
        self.same = tuple(same)
        self._last = started  # wall time up to here is already in the file's wall_time_s

    @contextlib.contextmanager
    def merged(self, results: ResultsBody) -> Iterator[ResultsBody]:
        """Under the lock: `results` with the file's other records added; written when the block ends."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        # A dotted file beside results.json; filelock leaves it behind, harmlessly, after release.
        with FileLock(str(self.output_dir / f".{FILE}.lock")):
            self._merge(results)
            results.setdefault("wall_time_s", 0.0)  # its place in the file: before what the block adds
            yield results
            now = time.perf_counter()
            results["wall_time_s"] = results.get("wall_time_s", 0.0) + now - self._last
            self._last = now
            write(self.path, results)

    def save(self, results: ResultsBody) -> None:
        """Merge and write (after each seed: a killed invocation loses only the seed it was training)."""
        with self.merged(results):
            pass

    def _merge(self, results: ResultsBody) -> None:
        on_disk = read(self.path)
        if on_disk is None:
            return
        differences = setting_differences(on_disk, results, self.same)
        if differences:
            raise UserError(f"another invocation wrote results with other settings to "
                            f"{str(self.output_dir)!r} ({'; '.join(differences)}); run seeds side by side "
                            "only with the same settings, or pass a new --output-dir")
        for key in RECORDS:
            mine = {(r["task"], r["seed"]) for r in results.get(key, [])}
            theirs = [r for r in on_disk.get(key, []) if (r["task"], r["seed"]) not in mine]
            if theirs:
                results[key] = sorted(results.get(key, []) + theirs, key=lambda r: (r["task"], r["seed"]))
        results["tasks"] = on_disk.get("tasks", []) + [t for t in results["tasks"]
                                                       if t not in on_disk.get("tasks", [])]
        # a grid's units each ask for one seed: the file says how many it holds, as one run of them would
        results["seeds"] = max(results["seeds"], seeds_held(results))
        # wall time: every invocation's own time, added up (side by side ones too)
        results["wall_time_s"] = on_disk.get("wall_time_s", 0.0)


def seeds_held(results: ResultsBody) -> int:
    """The most seeds any task's records (scored or diverged) hold."""
    held: dict[str, set[int]] = {}
    for key in RECORDS:
        for record in results.get(key, []):
            held.setdefault(record["task"], set()).add(record["seed"])
    return max(map(len, held.values()), default=0)


def resume(output_dir: Path, fresh: ResultsBody, same: Sequence[str] = ("format", "config")) -> ResultsBody:
    """`fresh`, or output_dir's results.json when it has the same model and the same `same` keys."""
    previous = read(Path(output_dir) / FILE)
    if previous is None:
        return fresh
    check_same(output_dir, previous, fresh, same)
    return previous | {"tasks": fresh["tasks"], "seeds": fresh["seeds"]}


def check_same(output_dir: Path, previous: ResultsBody, fresh: ResultsBody, same: Sequence[str]) -> None:
    """The one rule a rerun into output_dir is held to, a single run's resume and a grid's finished units
    alike (harness/grid/plan.py): results.json `previous` made with `fresh`'s model and `same` keys, else
    one UserError naming each setting, its old and new value, and the fix."""
    differences = setting_differences(previous, fresh, same)
    if differences:
        raise UserError(f"{str(output_dir)!r} holds results made with other settings "
                        f"({'; '.join(differences)}); resume it with the same settings, or pass a new "
                        "--output-dir")


_ABSENT = object()  # a key one of the two results.json bodies lacks (one written by another version)
# The blocks that hold a config's settings, compared by its one resume rule (foundation/infra/settings.py):
# resumable settings (the first seed: seed=1 beside seed=0 adds seeds; torch.compile) may change, and a key
# an older file lacks stands for the setting's value before it existed.
CONFIGS = {"config": FinetuneConfig, "settings": SquadConfig}


def setting_differences(previous: ResultsBody, fresh: ResultsBody, same: Sequence[str]) -> list[str]:
    """'key: old -> new' for the model path and each differing key of `same` that a resume may not change;
    keys of the config and settings blocks by their own names (as key=value sets them), of other blocks
    as `block.key`."""
    pairs = [("model", previous.get("model", {}).get("path", _ABSENT), fresh["model"]["path"])]
    for block in same:
        old, new = previous.get(block, _ABSENT), fresh[block]
        if isinstance(old, dict) and isinstance(new, dict):
            pairs += block_differences(block, old, new, _family(previous), _family(fresh))
        else:
            pairs.append((block, old, new))
    return shown(pairs)


def shown(pairs: list[tuple | str]) -> list[str]:
    """'key: old -> new' of each (key, old, new) that differs; a sentence as it is."""
    return [pair if isinstance(pair, str) else f"{pair[0]}: {_shown(pair[1])} -> {_shown(pair[2])}"
            for pair in pairs if isinstance(pair, str) or pair[1] != pair[2]]


def block_differences(block: str, old: dict, new: dict, old_family: str | None = None,
                      new_family: str | None = None) -> list[tuple | str]:
    """(key, old, new) of a block's differing keys; a config block's (CONFIGS) settings by the one resume
    rule (head=auto as the head it stands for on each side's model family), then any key only one side's
    version knows; keys of other blocks named `block.key`."""
    cls = CONFIGS.get(block)
    known = [field.name for field in dataclasses.fields(cls)] if cls else []
    pairs = []
    if cls:
        pairs = [(key, a, b) for key, a, b in settings.differences(cls, old, new)
                 if key != "head" or head_for(a, old_family) != head_for(b, new_family)]
    if not cls:
        return _nested(f"{block}.", old, new)
    pairs += [(key, old.get(key, _ABSENT), new.get(key, _ABSENT))
              for key in [*new, *(key for key in old if key not in new)] if key not in known]
    return pairs


def _nested(prefix: str, old: dict, new: dict) -> list[tuple | str]:
    """(key, old, new) of each differing leaf of two nested blocks, named `block.key.key`; a data block's
    files (text, tagging: data.files) as one sentence each, rather than two dicts of digests."""
    pairs: list[tuple | str] = []
    for key in [*new, *(key for key in old if key not in new)]:
        a, b = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if prefix == "data." and key == "files" and isinstance(a, dict) and isinstance(b, dict):
            pairs += _file_changes(a, b)
        elif isinstance(a, dict) and isinstance(b, dict):
            pairs += _nested(f"{prefix}{key}.", a, b)
        else:
            pairs.append((prefix + key, a, b))
    return pairs


def _file_changes(old: dict, new: dict) -> list[tuple | str]:
    """'the dev file 'dev.csv' changed (sha256 abc… -> def…)' for each split whose file differs."""
    changes: list[tuple | str] = []
    for split in [*new, *(split for split in old if split not in new)]:
        a, b = old.get(split), new.get(split)
        if a == b:
            continue
        label = SPLIT_FILES.get(split, f"{split} file")
        if not (isinstance(a, dict) and isinstance(b, dict)):
            what = "added" if a is None else "dropped" if b is None else "recorded otherwise"
            changes.append(f"the {label} {(b or a or {}).get('source', '')!r} was {what}")
        elif a.get("sha256") != b.get("sha256"):
            before, after = str(a.get("sha256"))[:12], str(b.get("sha256"))[:12]
            changes.append(f"the {label} {b.get('source', '')!r} changed (sha256 {before}… -> {after}…)")
        else:
            changes += _nested(f"data.files.{split}.", a, b)
    return changes


def _family(results: ResultsBody) -> str | None:
    model = results.get("model")
    return model.get("family") if isinstance(model, dict) else None


def _shown(value) -> str:
    return "(absent)" if value is _ABSENT else repr(value)

