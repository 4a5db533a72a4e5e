"""Score against pre-training FLOPs per objective: the table and plot of `harness experiment efficiency`.

Pure functions of the arms' GLUE results. Each task is scored with the metric the ELECTRA paper
reports (CoLA MCC, STS-B Spearman, the rest accuracy; the registry lists it last), so the numbers
line up with its Table 1. A seed's GLUE score is the mean over the tasks of that seed's task
scores (fine-tuning seed s of every task); an arm reports the median over seeds and the spread
(population standard deviation, min and max), and each task's median. Scores are x100.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from tasks import metrics
from tasks.registry import GLUE_AVERAGE_TASKS, GLUE_TASKS

CONTROL = "random-init"


@dataclass(frozen=True)
class Arm:
    """One pre-trained discriminator (or the untrained control) and its fine-tuning results."""

    objective: str  # an --objective, or CONTROL
    budget_flops: float  # the budget asked for; 0 for the control
    pretrain_flops: float  # what the run actually spent (>= budget by at most one step)
    results: dict  # the arm's GLUE results.json
    pretrain: dict = field(default_factory=dict)  # steps, tokens_seen, wall_time_s, metrics


@dataclass(frozen=True)
class Point:
    """An arm reduced to what the table and plot show."""

    objective: str
    budget_flops: float
    pretrain_flops: float
    seeds: int
    glue_median: float
    glue_std: float
    glue_min: float
    glue_max: float
    task_medians: dict[str, float]
    pretrain: dict
    # 95% interval of the arm's GLUE average (results.json `glue`, paper convention), when it has one,
    # and the mean over seeds it is about (the median is the paper's figure; an interval is the mean's)
    glue_ci_low: float | None = None
    glue_ci_high: float | None = None
    glue_mean: float | None = None


def paper_score(record: dict) -> float:
    """A results.json seed record's score in the paper's metric (0-1), first dev split (MNLI: matched)."""
    return metrics.paper_value(record["task"], record["metrics"])


def seed_scores(results: dict, tasks: Sequence[str]) -> dict[int, float]:
    """GLUE score per fine-tuning seed: mean of that seed's task scores, seeds with every task only."""
    by_seed: dict[int, dict[str, float]] = {}
    for record in results["runs"]:
        if record["task"] in tasks:
            by_seed.setdefault(record["seed"], {})[record["task"]] = paper_score(record)
    return {seed: 100 * statistics.fmean(scores[t] for t in tasks)
            for seed, scores in sorted(by_seed.items()) if set(tasks) <= scores.keys()}


def point(arm: Arm, tasks: Sequence[str]) -> Point:
    scores = list(seed_scores(arm.results, tasks).values())
    if not scores:
        raise ValueError(f"{arm.objective} at {arm.budget_flops:g} FLOPs has no seed with every task")
    task_medians = {t: 100 * statistics.median(paper_score(r) for r in arm.results["runs"] if r["task"] == t)
                    for t in tasks}
    glue = arm.results.get("glue") or {}
    interval = (100 * glue["ci_low"], 100 * glue["ci_high"], 100 * glue["interval"]["value"]) \
        if "ci_low" in glue and "interval" in glue and \
        set(glue.get("tasks", ())) == {t for t in tasks if t in GLUE_AVERAGE_TASKS} else (None, None, None)
    return Point(arm.objective, arm.budget_flops, arm.pretrain_flops, len(scores), statistics.median(scores),
                 statistics.pstdev(scores), min(scores), max(scores), task_medians, arm.pretrain, *interval)


def markdown(points: Sequence[Point], tasks: Sequence[str]) -> str:
    """One row per arm, control first, then by budget and objective."""
    header = ["objective", "budget FLOPs", "spent FLOPs", "steps", "tokens", "pre-train time",
              *[f"{_display(t)} ({GLUE_TASKS[t].paper_metric})" for t in tasks],
              "GLUE median", "± std", "min–max", "seeds", "mean [95% CI]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for p in _ordered(points):
        cells = [p.objective, _flops(p.budget_flops), _flops(p.pretrain_flops),
                 _count(p.pretrain.get("steps")), _count(p.pretrain.get("tokens_seen")),
                 _minutes(p.pretrain.get("wall_time_s")), *[f"{p.task_medians[t]:.1f}" for t in tasks],
                 f"**{p.glue_median:.1f}**", f"{p.glue_std:.1f}", f"{p.glue_min:.1f}–{p.glue_max:.1f}",
                 str(p.seeds), _interval(p)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(points: Sequence[Point], tasks: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["objective", "budget_flops", "pretrain_flops", "steps", "tokens_seen", "pretrain_wall_s",
                     *tasks, "glue_median", "glue_std", "glue_min", "glue_max", "seeds", "glue_ci_low",
                     "glue_ci_high", "glue_mean"])
    for p in _ordered(points):
        writer.writerow([p.objective, p.budget_flops, p.pretrain_flops, p.pretrain.get("steps", ""),
                         p.pretrain.get("tokens_seen", ""), p.pretrain.get("wall_time_s", ""),
                         *[round(p.task_medians[t], 2) for t in tasks], round(p.glue_median, 2),
                         round(p.glue_std, 2), round(p.glue_min, 2), round(p.glue_max, 2), p.seeds,
                         *("" if v is None else round(v, 2)
                           for v in (p.glue_ci_low, p.glue_ci_high, p.glue_mean))])
    return buffer.getvalue()


def plot_png(points: Sequence[Point], title: str) -> bytes:
    """GLUE mean over seeds with its 95% interval over seeds and dev examples (median and min–max over
    seeds for arms without one) against spent FLOPs, a line per objective; the control is a dashed
    line, its band shaded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    trained = [p for p in points if p.objective != CONTROL]
    for index, objective in enumerate(dict.fromkeys(p.objective for p in trained)):
        mine = sorted((p for p in trained if p.objective == objective), key=lambda p: p.pretrain_flops)
        x = [p.pretrain_flops for p in mine]
        y = [_centre(p) for p in mine]
        error = [[_centre(p) - _low(p) for p in mine], [_high(p) - _centre(p) for p in mine]]
        axes.errorbar(x, y, yerr=error, marker="os^Dv"[index % 5], capsize=3, linewidth=1.6, label=objective,
                      color=f"C{index}")
    for p in points:
        if p.objective == CONTROL:
            axes.axhline(_centre(p), color="grey", linestyle="--", linewidth=1.2,
                         label=f"{CONTROL} (no pre-training)")
            axes.axhspan(_low(p), _high(p), color="grey", alpha=0.12)
    if trained:
        axes.set_xscale("log")
    axes.set_xlabel("pre-training FLOPs (ELECTRA paper convention, log scale)")
    shown = "mean over seeds, bars: its 95% interval" if all(p.glue_ci_low is not None for p in points) \
        else "mean and 95% interval; median and min–max where an arm has no interval"
    axes.set_ylabel(f"GLUE dev score x100 ({shown})", fontsize=9)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    if points:  # an empty legend warns
        axes.legend(fontsize=8, loc="best")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _low(p: Point) -> float:
    return p.glue_min if p.glue_ci_low is None else p.glue_ci_low


def _high(p: Point) -> float:
    return p.glue_max if p.glue_ci_high is None else p.glue_ci_high


def _centre(p: Point) -> float:
    """Where a point is drawn: the mean its interval is about, else the median its min–max spans."""
    return p.glue_median if p.glue_mean is None else p.glue_mean


def _interval(p: Point) -> str:
    return "–" if p.glue_ci_low is None else f"{p.glue_mean:.1f} [{p.glue_ci_low:.1f}, {p.glue_ci_high:.1f}]"


def significance(comparisons: Sequence[dict]) -> str:
    """Markdown lines from `harness compare` GLUE rows: is the leader's lead over each other arm real?

    Each comparison: {"a": arm, "b": arm, "budget_flops": ..., "row": compare's GLUE row} or, when it
    could not be computed, {"a", "b", "budget_flops", "error": why}.
    """
    lines = ["", "## Significance (`harness compare`, GLUE average, paper convention)", ""]
    if not comparisons:
        return "\n".join(lines + ["No pair of arms to compare yet.", ""])
    for c in comparisons:
        where = f"at {_flops(c['budget_flops'])} FLOPs" if c["budget_flops"] else ""
        head = f"- **{c['a']} vs {c['b']}** {where}".rstrip() + ": "
        if "error" in c:
            lines.append(head + f"not computed ({c['error']})")
            continue
        r = c["row"]
        detectable = "n/a" if r["detectable"] is None else f"{r['detectable']:.1f} points"  # no variance
        lines.append(head + f"{r['difference']:+.1f} points [{r['ci_low']:+.1f}, {r['ci_high']:+.1f}], "
                     f"p = {r['p_value']:.3g}: **{r['verdict']}** (detectable: {detectable}; "
                     f"{r['seeds_a']} vs {r['seeds_b']} seeds; interval covers {r['covers']})")
    return "\n".join(lines + [""])


def _ordered(points: Sequence[Point]) -> list[Point]:
    return sorted(points, key=lambda p: (p.objective != CONTROL, p.budget_flops, p.objective))


def _display(task: str) -> str:
    return GLUE_TASKS[task].dir_name  # CoLA, STS-B, as the paper writes them


def _flops(value: float) -> str:
    return "0" if not value else f"{value:.2e}"


def _count(value) -> str:
    return "" if value is None else f"{value:,}"


def _minutes(seconds) -> str:
    return "" if seconds is None else f"{seconds / 60:.1f} min"
