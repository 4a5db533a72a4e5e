"""results.json of a run directory that several invocations may write at once.

A user runs seeds side by side into one --output-dir (`seed=0` and `seed=1` in two shells). Each
invocation holds its own records in memory, so a plain write would keep only the last writer's seeds.
Every write therefore reads the file under a lock beside it, adds the (task, seed) records that other
invocations wrote, and writes the union; the summary is computed inside the same lock, so the last
invocation to finish summarises every seed. Invocations with other settings are refused in one line.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from filelock import FileLock

from pretrain.common import atomic
from pretrain.common.errors import UserError
from reports.results_schema import FILE, RECORDS, read


class ResultsFile:
    """OUT/results.json, merged with other invocations' records on every write."""

    def __init__(self, output_dir: Path, started: float, same: Sequence[str] = ("format", "config")):
        self.output_dir = Path(output_dir)
        self.path = self.output_dir / FILE
        self.same = tuple(same)
        self._last = started  # wall time up to here is already in the file's wall_time_s

    @contextlib.contextmanager
    def merged(self, results: dict) -> Iterator[dict]:
        """Under the lock: `results` with the file's other records added; written when the block ends."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        # A dotted file beside results.json; filelock leaves it behind, harmlessly, after release.
        with FileLock(str(self.output_dir / f".{FILE}.lock")):
            self._merge(results)
            yield results
            now = time.perf_counter()
            results["wall_time_s"] = results.get("wall_time_s", 0.0) + now - self._last
            self._last = now
            atomic.write_json(self.path, results)

    def save(self, results: dict) -> None:
        """Merge and write (after each seed: a killed invocation loses only the seed it was training)."""
        with self.merged(results):
            pass

    def _merge(self, results: dict) -> None:
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
        # wall time: every invocation's own time, added up (side by side ones too)
        results["wall_time_s"] = on_disk.get("wall_time_s", 0.0)


def resume(output_dir: Path, fresh: dict, same: Sequence[str] = ("format", "config")) -> dict:
    """`fresh`, or output_dir's results.json when it has the same model and the same `same` keys."""
    previous = read(Path(output_dir) / FILE)
    if previous is None:
        return fresh
    differences = setting_differences(previous, fresh, same)
    if differences:
        raise UserError(f"{str(output_dir)!r} holds results made with other settings "
                        f"({'; '.join(differences)}); resume it with the same settings, or pass a new "
                        "--output-dir")
    return previous | {"tasks": fresh["tasks"], "seeds": fresh["seeds"]}


_ABSENT = object()  # a key one of the two results.json bodies lacks (one written by another version)
# Settings an invocation may change: its first seed (seed=1 beside seed=0 adds seeds, as --seeds does)
FREE = ("seed",)


def setting_differences(previous: dict, fresh: dict, same: Sequence[str]) -> list[str]:
    """'key: old -> new' for the model path and each differing key of `same` but FREE; keys of the config
    and settings blocks by their own names (as key=value sets them), of other blocks as `block.key`."""
    pairs = [("model", previous.get("model", {}).get("path", _ABSENT), fresh["model"]["path"])]
    for block in same:
        old, new = previous.get(block, _ABSENT), fresh[block]
        if isinstance(old, dict) and isinstance(new, dict):
            prefix = "" if block in ("config", "settings") else f"{block}."
            pairs += [(prefix + key, old.get(key, _ABSENT), new.get(key, _ABSENT))
                      for key in [*new, *(key for key in old if key not in new)] if key not in FREE]
        else:
            pairs.append((block, old, new))
    return [f"{key}: {_shown(old)} -> {_shown(new)}" for key, old, new in pairs if old != new]


def _shown(value) -> str:
    return "(absent)" if value is _ABSENT else repr(value)

