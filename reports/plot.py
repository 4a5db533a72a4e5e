"""GLUE score against pre-training FLOPs (log scale): measured and published points apart at a glance.

Every row with a GLUE score is drawn: measured rows off ELECTRA's recipe (a subsampled training set, fewer
epochs) with their own marker, an untrained control left of the FLOPs axis and a checkpoint whose
pre-training FLOPs are unknown right of it, each band named above the plot and under it."""

from __future__ import annotations

import io
import math
from pathlib import Path

from reports.leaderboard import EVALUATED, MEASURED, Row
from reports.published import GLUE_COLUMNS

DEPARTS = "departs"
STYLES = {MEASURED: {"marker": "o", "color": "#d95f02", "label": "measured (this harness)", "size": 70},
          DEPARTS: {"marker": "D", "color": "#d95f02", "size": 50,
                    "label": "measured, off the recipe (the table's recipe column says how)"},
          "published": {"marker": "s", "color": "#7570b3", "label": "published (paper, READMEs)", "size": 45}}
# Where rows without a log position go: decades left of the fewest FLOPs (an untrained control, 0) and right
# of the most (a published checkpoint whose pre-training FLOPs nobody published), past a dashed line.
BAND_DECADES = 1.5
NO_PRETRAINING, FLOPS_UNKNOWN = "no pre-training", "FLOPs unknown"


def plottable(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """(rows with a GLUE score, drawn: on the FLOPs axis, or in the no-pre-training or unknown-FLOPs band;
    measured rows without a GLUE score, or only evaluated, named under the plot instead). Rows of your own
    data are neither: they have no GLUE score to miss."""
    shown = [r for r in rows if "glue_score" in r.values and r.stage != EVALUATED]
    missing = [r for r in rows if r.source == MEASURED and not r.task and r not in shown]
    return shown, missing


def style_of(row: Row) -> str:
    if row.source != MEASURED:
        return "published"
    return DEPARTS if row.departures else MEASURED


def positions(rows: list[Row]) -> tuple[dict[str, float], tuple[float, float]]:
    """Each row's x (by key) and the FLOPs axis's own range: rows without a log position in the bands."""
    known = [r.values["pretrain_flops"] for r in rows if r.values.get("pretrain_flops", 0) > 0]
    low, high = (min(known), max(known)) if known else (1e14, 1e14)
    places = {}
    for row in rows:
        flops = row.values.get("pretrain_flops")
        places[row.key] = (high * 10 ** BAND_DECADES if flops is None
                           else low / 10 ** BAND_DECADES if flops <= 0 else flops)
    return places, (low / 10 ** (BAND_DECADES / 2), high * 10 ** (BAND_DECADES / 2))


def flops_vs_glue_png(rows: list[Row]) -> bytes:
    """A PNG (Agg canvas, no pyplot state): one point per row, labelled with its model."""
    buffer = io.BytesIO()
    flops_vs_glue_figure(rows).savefig(buffer, format="png")
    return buffer.getvalue()


def flops_vs_glue_figure(rows: list[Row]):
    """The plot's matplotlib Figure (on an Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown, missing = plottable(rows)
    places, (left, right) = positions(shown)
    figure = Figure(figsize=(9, 5.5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for source, style in STYLES.items():
        mine = [r for r in shown if style_of(r) == source]
        if not mine:
            continue
        x = [places[r.key] for r in mine]
        axes.scatter(x, [r.values["glue_score"] for r in mine], marker=style["marker"], s=style["size"],
                     color="white" if source == DEPARTS else style["color"], label=style["label"],
                     edgecolors=style["color"] if source == DEPARTS else
                     "black" if source == MEASURED else "none", linewidths=1.4 if source == DEPARTS else 0.6,
                     zorder=3)
        _bars(axes, [r for r in mine if {"glue_score_ci_low", "glue_score_ci_high"} <= r.values.keys()],
              places, style["color"])
        for series in _series(mine):  # e.g. ELECTRA-Small and its 50%/25%/... trained checkpoints
            points = sorted((places[r.key], r.values["glue_score"]) for r in series)
            axes.plot(*zip(*points, strict=True), color=style["color"], alpha=0.4, linewidth=1, zorder=2)
        for row in mine:
            # Partial versions sit on a rising line: label them below it, the rest above-right.
            offset = (3, -11) if _base(row, mine) else (6, 3)
            axes.annotate(_label(row, mine), (places[row.key], row.values["glue_score"]),
                          xytext=offset, textcoords="offset points", fontsize=7.5, color=style["color"])
    axes.set_xscale("log")
    axes.set_xlabel("pre-training FLOPs (ELECTRA paper convention, log scale)")
    axes.set_ylabel("GLUE dev score (x100; bars: 95% interval)")
    axes.set_title("GLUE dev score vs pre-training compute")
    axes.grid(True, which="major", alpha=0.35)
    axes.grid(True, which="minor", axis="x", alpha=0.12)
    if shown:
        _bands(axes, shown, places, left, right)
        axes.legend(loc="lower right", fontsize=8)
        axes.margins(x=0.15, y=0.1)
    else:
        axes.text(0.5, 0.5, "no row has a GLUE score", ha="center", transform=axes.transAxes)
    note = _footnote(shown, missing)
    if note:
        # supxlabel, unlike figure.text, gets its own room from the constrained layout.
        figure.supxlabel(note, x=0.01, ha="left", fontsize=7.5, color="#555")
    return figure


def _bars(axes, bars: list[Row], places: dict[str, float], color: str) -> None:
    """95% intervals over fine-tuning seeds and dev examples."""
    if not bars:
        return
    y = [r.values["glue_score"] for r in bars]
    axes.errorbar([places[r.key] for r in bars], y, fmt="none", ecolor=color, elinewidth=1, capsize=3,
                  zorder=2, yerr=[[v - r.values["glue_score_ci_low"] for v, r in zip(y, bars, strict=True)],
                                  [r.values["glue_score_ci_high"] - v for v, r in zip(y, bars, strict=True)]])


def _bands(axes, shown: list[Row], places: dict[str, float], left: float, right: float) -> None:
    """Dashed lines around the FLOPs axis, each band named where it holds a row; ticks only on the axis."""
    from matplotlib.ticker import FixedLocator, LogFormatterSciNotation, NullLocator

    flops = [r.values.get("pretrain_flops") for r in shown]
    for edge, name, used in ((left, NO_PRETRAINING, any(f is not None and f <= 0 for f in flops)),
                             (right, FLOPS_UNKNOWN, any(f is None for f in flops))):
        if used:
            axes.axvline(edge, color="#999", linestyle="--", linewidth=0.8, zorder=1)
            x = edge / 10 ** (BAND_DECADES / 2) if edge == left else edge * 10 ** (BAND_DECADES / 2)
            axes.text(x, 1.01, name, transform=axes.get_xaxis_transform(), ha="center", fontsize=7.5,
                      color="#555")
    decades = range(math.ceil(math.log10(left)), math.floor(math.log10(right)) + 1)
    axes.xaxis.set_major_locator(FixedLocator([10.0 ** k for k in decades]))
    axes.xaxis.set_major_formatter(LogFormatterSciNotation())
    axes.xaxis.set_minor_locator(NullLocator())


def _footnote(shown: list[Row], missing: list[Row]) -> str:
    import textwrap

    lines = []
    # measured first: the note is cut after four names, and the paper's rows are in the table anyway
    unknown = sorted((r for r in shown if "pretrain_flops" not in r.values),
                     key=lambda r: r.source != MEASURED)
    if unknown:
        lines.append(f"{FLOPS_UNKNOWN} (right of the dashed line): {_names(unknown)}")
    if any(r.values.get("pretrain_flops", 1) <= 0 for r in shown):
        lines.append(f"{NO_PRETRAINING} (left of the dashed line): an untrained control, 0 FLOPs")
    if missing:
        lines.append(f"not plotted (no GLUE score, or evaluated without fine-tuning): {_names(missing)}")
    # Wrapped: recipe tags make the names long, and one line ran off the figure's right edge.
    return "\n".join(textwrap.fill(line, width=150) for line in lines)


def _names(rows: list[Row]) -> str:
    return ", ".join(r.label for r in rows[:4]) + (" ..." if len(rows) > 4 else "")


def _base(row: Row, rows: list[Row]) -> Row | None:
    """The row this one is a partial version of ('ELECTRA-Small 50% trained' -> 'ELECTRA-Small')."""
    bases = [r for r in rows if r.reference == row.reference and row.model.startswith(r.model + " ")]
    return max(bases, key=lambda r: len(r.model)) if bases else None


def _series(rows: list[Row]) -> list[list[Row]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        base = _base(row, rows)
        if base is not None:
            groups.setdefault(base.key, [base]).append(row)
    return list(groups.values())


def _label(row: Row, rows: list[Row]) -> str:
    """Model name; a partial version only what differs ('50%'); a partial GLUE score its task count."""
    base = _base(row, rows)
    if base is not None:
        return row.model[len(base.model) + 1:].removesuffix(" trained")
    name = row.model if row.source != MEASURED else "/".join(Path(row.model).parts[-2:])
    tasks = row.values.get("glue_tasks")
    partial = f" ({tasks:.0f}/{len(GLUE_COLUMNS)} tasks)" if tasks and tasks < len(GLUE_COLUMNS) else ""
    return f"{name}{partial}"
