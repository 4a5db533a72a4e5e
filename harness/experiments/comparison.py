"""`harness compare RUN_A RUN_B`: is A really better than B? Paired differences on the same dev examples.

Per task, the paper's metric (SQuAD: EM and F1), and the GLUE average in the paper's convention:
A minus B in points (x100 for GLUE, percent for SQuAD), its 95% interval and two-sided p-value
(reports/stats.py: seed variance of both runs plus the dev-set variance of the paired difference,
one bootstrap resample of the shared dev examples scoring both runs, less the seed-by-example part
the seed variances already hold), a verdict, the smallest
difference the runs could have detected, and the seeds per run that would detect `target` points.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from foundation.infra.errors import UserError
from harness import kinds
from reports import dev_outputs, intervals, recipe, stats
from reports.dev_outputs import SplitOutputs
from reports.leaderboard import load_results
from tasks.registry import GLUE_AVERAGE_TASKS, GLUE_CONVENTION, GLUE_TASKS

GLUE_ROW = "GLUE"


@dataclass(frozen=True)
class ResultsFolder:
    """A finished `harness run` output directory with every task's per-seed dev outputs."""

    path: Path
    kind: str  # the kind of task (harness/kinds.py) its results format names
    outputs: dict[str, dict[str, SplitOutputs]]  # task -> split -> outputs
    # what the kind's description fingerprints of the data it trained and scored on (results.json `data`):
    # {"train file": ("sha256", digest), ...}
    data: dict[str, tuple[str, str]] = field(default_factory=dict)
    percent: bool = False  # its scores are percent already (SQuAD), not fractions
    best_epoch: bool = False  # select_epoch=best: its scores are each seed's best epoch on dev


def load_results_folder(path: Path) -> ResultsFolder:
    """A run directory (or its results.json); UserError when it cannot be compared."""
    if not path.exists():
        raise UserError(f"run directory {str(path)!r} does not exist; pass a `harness run` --output-dir")
    [(file, results)] = load_results([path])
    kind = kinds.of_results(results["format"])
    described = kinds.load(kind.description)
    outputs = {}
    for task in results["summary"]:
        seeds = sorted(r["seed"] for r in results["runs"] if r["task"] == task)
        found = dev_outputs.load_task(file.parent, task, seeds)
        if found is None:
            raise UserError(f"{str(file.parent)!r} has no per-seed dev outputs for {task} (predictions/"
                            f"{task}-seedN/{dev_outputs.FILE}, written since this harness version); re-run "
                            "the same `harness run` in a fresh --output-dir")
        outputs[task] = found
    return ResultsFolder(file.parent, kind.name, outputs, described.fingerprint(results.get("data")),
                         described.percent_scores,
                         (results.get("config") or {}).get("select_epoch") == "best")


def _metrics(task: str, splits: dict[str, SplitOutputs]) -> list[tuple[str, str]]:
    """(split, metric) pairs compared for a task: the paper's metric, or SQuAD's EM and F1."""
    if task in GLUE_TASKS:
        spec = GLUE_TASKS[task]
        return [(spec.dev_splits[0], spec.paper_metric)]
    split = next(iter(splits))
    if splits[split].headline is not None:  # your own task: its headline metric
        return [(split, splits[split].headline)]
    return [(split, name) for name in splits[split].scores]


def _same_data(a: ResultsFolder, b: ResultsFolder) -> None:
    """Runs pair only on the same data, training data included: each file the kind fingerprints (its sha256,
    or what the kind records of it) must agree; one line names the first that does not."""
    for label in dict.fromkeys([*a.data, *b.data]):
        if a.data.get(label) != b.data.get(label):
            tasks = ", ".join(a.outputs)
            raise UserError(f"runs A and B were trained or scored on different data: the {label} of {tasks} "
                            f"differs ({_shown(a.data.get(label))} in A, {_shown(b.data.get(label))} in B); "
                            "compare runs on the same data")


def _shown(found: tuple[str, str] | None) -> str:
    if found is None:
        return "none recorded"
    what, value = found
    return f"{what} {value[:12]}" if what == "sha256" else f"{what} {value}"


def _pair(a: SplitOutputs, b: SplitOutputs, task: str, split: str) -> list[str]:
    """Refuse unpairable outputs; return notes on what differs but still pairs."""
    if a.dev_set != b.dev_set or a.ids != b.ids:
        raise UserError(f"runs A and B scored different {task} {split} examples (ids or gold labels "
                        "differ: another dev file, max_eval_examples or holdout split); they cannot be "
                        "paired")
    if a.tokenization != b.tokenization:
        return [f"{task}: A and B tokenise the dev examples differently (tokenizer or max_length); examples "
                "pair one to one, so the difference is between model+tokenizer pairs"]
    return []


def _row(task: str, metric: str, a: stats.Estimate, b: stats.Estimate, difference: stats.Estimate,
         scale: float, target: float) -> dict:
    found = stats.compare(difference)
    # no variance at all (every seed of A and B scores the same on every resample of the dev set, as two
    # taggers that predict O everywhere): a detectable difference of 0 and "2 seeds" would be claims the
    # data cannot back; both are left out and a note says why
    flat = difference.se < 1e-12  # scores are fractions; what is left is float rounding
    seeds = stats.seeds_needed(difference, target / scale) if difference.seeds > 1 and not flat else None
    alpha = 1 - stats.CONFIDENCE
    verdict = ("A better" if difference.value > 0 else "B better") if found.p_value < alpha else \
        "no detectable difference at this sample size"
    return {"task": task, "metric": metric, "a": scale * a.value, "b": scale * b.value,
            "difference": scale * difference.value, "ci_low": scale * difference.low,
            "ci_high": scale * difference.high, "p_value": found.p_value, "verdict": verdict,
            "detectable": None if flat else scale * found.detectable, "seeds_a": a.seeds, "seeds_b": b.seeds,
            "seeds_needed": seeds, "covers": difference.covers}


def compare(a: ResultsFolder, b: ResultsFolder, tasks: Sequence[str] | None = None,
            target: float = 1.0) -> dict:
    """Per task and for the GLUE average: A - B with interval, p-value, verdict; JSON-ready."""
    if a.kind != b.kind:
        raise UserError(f"A is a {a.kind} run and B a {b.kind} run; compare runs of the same kind of task")
    _same_data(a, b)
    chosen = list(tasks or a.outputs)
    missing = {name: [t for t in chosen if t not in folder.outputs] for name, folder in (("A", a), ("B", b))}
    if any(missing.values()):
        common = [t for t in a.outputs if t in b.outputs]
        lacking = "; ".join(f"{name} lacks {', '.join(ts)}" for name, ts in missing.items() if ts)
        hint = f"compare the common ones with --tasks {','.join(common)}" if common else "they share none"
        raise UserError(f"the runs are on different tasks ({lacking}); {hint}")
    scale = 1.0 if a.percent else 100.0
    rows, notes, glue_parts = [], [], []
    notes += [f"{name}'s scores are its {recipe.BEST_EPOCH} (select_epoch=best): chosen on the dev set they "
              "are scored on, so inflated, and not comparable with a last-epoch run's"
              for name, folder in (("A", a), ("B", b)) if folder.best_epoch]
    for task in chosen:
        for split, metric in _metrics(task, a.outputs[task]):
            split_a, split_b = a.outputs[task][split], b.outputs[task].get(split)
            if split_b is None:
                raise UserError(f"B has no {task} {split} outputs; it cannot be paired with A")
            notes += _pair(split_a, split_b, task, split)
            part_a, part_b = intervals.part(split_a, [metric]), intervals.part(split_b, [metric])
            est_a, est_b = intervals.estimate([part_a]), intervals.estimate([part_b])
            dev_var = stats.dev_variance([part_a.per_seed, part_b.per_seed], part_a.num_examples, (1, -1))
            difference = stats.paired_difference(part_a.seed_scores, part_b.seed_scores, dev_var,
                                                 bounds=part_a.bounds)
            rows.append(_row(task, metric, est_a, est_b, difference, scale, target))
            if rows[-1]["detectable"] is None:
                notes.append(f"{task} {metric}: A and B score the same on every seed and every resample of "
                             "the dev set (no variance; does each predict one label everywhere?): the "
                             "interval is a point, and no detectable difference or seed count can be "
                             "measured (n/a)")
            if task in GLUE_AVERAGE_TASKS:
                glue_parts.append((est_a, est_b, dev_var))
    if glue_parts:
        glue_a = stats.mean_of([p[0] for p in glue_parts])
        glue_b = stats.mean_of([p[1] for p in glue_parts])
        dev_var = sum(p[2] for p in glue_parts) / len(glue_parts) ** 2  # tasks' dev sets are independent
        rows.append(_row(GLUE_ROW, "paper convention", glue_a, glue_b,
                         stats.difference_of(glue_a, glue_b, dev_var), scale, target))
    return {"a": str(a.path), "b": str(b.path), "benchmark": a.kind, "tasks": chosen, "rows": rows,
            "notes": list(dict.fromkeys(notes)), "target": target, "confidence": stats.CONFIDENCE,
            "power": stats.POWER, "n_resamples": stats.N_RESAMPLES, "resample_seed": stats.SEED,
            "glue_convention": GLUE_CONVENTION if glue_parts else None,
            "scale": "points (x100)" if scale == 100 else "percent"}


def table(result: dict) -> str:
    """The comparison as aligned text, with what the numbers mean underneath."""
    header = ("task", "metric", "A", "B", "A - B [95% CI]", "p", "verdict", "detectable",
              f"seeds for {result['target']:g}")
    rows = [(r["task"], r["metric"], f"{r['a']:.2f}", f"{r['b']:.2f}",
             f"{r['difference']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]", _p(r["p_value"]),
             r["verdict"], "n/a" if r["detectable"] is None else f"{r['detectable']:.2f}", _seeds(r))
            for r in result["rows"]]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in (header, *rows)]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    covers = sorted({r["covers"] for r in result["rows"]})
    lines += [f"A = {result['a']}", f"B = {result['b']}",
              f"A, B: means over seeds, {result['scale']}; the interval covers {' / '.join(covers)}; "
              f"p: two-sided t test of A - B = 0 (Satterthwaite df); detectable: smallest true difference "
              f"found with {result['power']:.0%} power at alpha {1 - result['confidence']:.2f}; seeds for "
              f"{result['target']:g}: seeds per run to detect {result['target']:g} points (- : the dev set "
              "alone is too small; ? : needs 2+ seeds per run to measure seed variance)"]
    if result["glue_convention"]:
        lines.append(f"GLUE: mean of the tasks compared, {result['glue_convention']}")
    return "\n".join(lines + [f"note: {note}" for note in result["notes"]])


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _seeds(row: dict) -> str:
    if row["detectable"] is None:
        return "n/a"
    if min(row["seeds_a"], row["seeds_b"]) < 2:
        return "?"
    return "-" if row["seeds_needed"] is None else str(row["seeds_needed"])


def to_json(result: dict) -> str:
    return json.dumps(result, indent=2)
