"""The results tables printed at the end of a run: GLUE's, and that of a task read from files (scores x100,
as the paper prints them)."""

from __future__ import annotations

from reports import recipe, stats
from tasks.registry import GLUE_CONVENTION

NO_INTERVAL = "–"  # an older results.json, or a run without dev outputs


def with_interval(mean: float | None, found: dict, scale: float = 100) -> str:
    """'50.9 [48.1, 53.6]': a mean over seeds and its interval (an interval is about the mean, not the
    median beside it), '50.9 [–]' without one, or '–' where no mean was recorded."""
    if mean is None:
        return NO_INTERVAL
    if "ci_low" not in found:
        return f"{scale * mean:.1f} [{NO_INTERVAL}]"
    return f"{scale * mean:.1f} [{scale * found['ci_low']:.1f}, {scale * found['ci_high']:.1f}]"


def glue_table(results: dict) -> str:
    header = ("task", "metric", "median", "mean [95% CI]", "std", "best", "seeds", "train time", "train ex/s")
    rows = []
    for task, summary in results["summary"].items():
        for metric, found in summary.items():
            if not isinstance(found, dict):
                continue
            timing = (_duration(summary["train_time_s"]), f"{summary['train_examples_per_s']:.1f}")
            rows.append((task if metric == "score" else "", metric, f"{100 * found['median']:.1f}",
                         with_interval(found["mean"], found), f"{100 * found['std']:.1f}",
                         f"{100 * found['best']:.1f}", str(found["n"]),
                         *(timing if metric == "score" else ("", ""))))
    for task in dict.fromkeys(r["task"] for r in results.get("diverged", [])):
        if task not in results["summary"]:  # every seed diverged: no scores, but not left unsaid
            rows.append((task, "diverged", "–", "", "", "", "0", "", ""))
    glue = results.get("glue") or {"score": results["glue_score"]}
    mean = glue.get("interval", {}).get("value")  # the mean of task means, which the interval is about
    rows.append(("GLUE", "paper convention*", f"{100 * glue['score']:.1f}", with_interval(mean, glue),
                 "", "", "", "", ""))
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             for row in (header, *rows)]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines + notes(results))


def notes(results: dict) -> list[str]:
    """What the GLUE row averages and what the intervals cover."""
    glue = results.get("glue") or {}
    lines = [f"* GLUE = mean of task medians (mean column: of task means), "
             f"{glue.get('convention', GLUE_CONVENTION)}"]
    lines += [f"diverged: {r['task']} seed {r['seed']} ({r['error']}), left out of medians and GLUE"
              for r in results.get("diverged", [])]
    best = recipe.best_epoch_note(results)
    lines += [best] if best else []
    lines.append(interval_note(results) or
                 f"[{NO_INTERVAL}]: no interval (no per-seed dev outputs in this run directory)")
    return lines


def interval_note(results: dict) -> str | None:
    """What the tables' intervals are, or None where the summary has none."""
    covers = sorted({found["ci_covers"] for summary in results["summary"].values()
                     for found in summary.values() if isinstance(found, dict) and "ci_covers" in found})
    if not covers:
        return None
    what = ("of the expected score (mean over fine-tuning seeds)" if covers != [stats.DEV_ONLY] else
            "of this seed's expected score on such dev sets, no seed variance in it (2+ seeds measure that)")
    return (f"95% CI: {what}, covering {' / '.join(covers)}; t quantiles with Satterthwaite df, "
            f"{stats.N_RESAMPLES} dev-set bootstrap resamples, cut to the metric's range")


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


def read_task_table(results: dict) -> str:
    """A task read from files (your own text, tagging): its metrics over seeds (x100), the headline first,
    with intervals, and its files' sha256."""
    task = results["data"]["task"]
    header = ("task", "metric", "median", "mean [95% CI]", "std", "best", "seeds")
    rows = []
    for name, summary in results["summary"].items():
        for metric in [task["headline"], *(m for m in task["metrics"] if m != task["headline"])]:
            found = summary.get(metric)
            if isinstance(found, dict):
                rows.append((name if metric == task["headline"] else "", metric,
                             f"{100 * found['median']:.1f}",
                             with_interval(found["mean"], found), f"{100 * found['std']:.1f}",
                             f"{100 * found['best']:.1f}", str(found["n"])))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in (header, *rows)]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    digests = ", ".join(f"{split} {info['sha256'][:12]}" for split, info in results["data"]["files"].items())
    notes = (interval_note(results), recipe.best_epoch_note(results), recipe.threshold_note(results))
    return "\n".join(lines + [f"data: {digests} (sha256); x100"] + [n for n in notes if n])
