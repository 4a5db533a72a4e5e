"""GLUE score against pre-training FLOPs (log scale): measured and published points apart at a glance."""

from __future__ import annotations

import io
from pathlib import Path

from reports.leaderboard import MEASURED, Row
from reports.published import GLUE_COLUMNS

STYLES = {MEASURED: {"marker": "o", "color": "#d95f02", "label": "measured (this harness)", "size": 70},
          "published": {"marker": "s", "color": "#7570b3", "label": "published (paper, READMEs)", "size": 45}}


def plottable(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """(rows with both pre-training FLOPs and a GLUE score, measured GLUE or SQuAD rows left out for lack of
    one or for departing from the recipe: their scores do not belong beside the paper's). Rows of your own
    data are neither: they have no GLUE score to miss."""
    # An untrained control spent 0 FLOPs: it has no place on a log axis, so it is named below the plot.
    shown = [r for r in rows if {"pretrain_flops", "glue_score"} <= r.values.keys() and not r.departures
             and r.values["pretrain_flops"] > 0]
    missing = [r for r in rows if r.source == MEASURED and not r.task and r not in shown]
    return shown, missing


def flops_vs_glue_png(rows: list[Row]) -> bytes:
    """A PNG (Agg canvas, no pyplot state): one point per row, labelled with its model."""
    buffer = io.BytesIO()
    flops_vs_glue_figure(rows).savefig(buffer, format="png")
    return buffer.getvalue()


def flops_vs_glue_figure(rows: list[Row]):
    """The plot's matplotlib Figure (on an Agg canvas)."""
    import textwrap

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown, missing = plottable(rows)
    figure = Figure(figsize=(9, 5.5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for source, style in STYLES.items():
        mine = [r for r in shown if (r.source == MEASURED) == (source == MEASURED)]
        if not mine:
            continue
        axes.scatter([r.values["pretrain_flops"] for r in mine], [r.values["glue_score"] for r in mine],
                     marker=style["marker"], s=style["size"], color=style["color"], label=style["label"],
                     edgecolors="black" if source == MEASURED else "none", linewidths=0.6, zorder=3)
        bars = [r for r in mine if {"glue_score_ci_low", "glue_score_ci_high"} <= r.values.keys()]
        if bars:  # 95% intervals over fine-tuning seeds and dev examples
            y = [r.values["glue_score"] for r in bars]
            axes.errorbar([r.values["pretrain_flops"] for r in bars], y, fmt="none", ecolor=style["color"],
                          elinewidth=1, capsize=3, zorder=2,
                          yerr=[[v - r.values["glue_score_ci_low"] for v, r in zip(y, bars, strict=True)],
                                [r.values["glue_score_ci_high"] - v for v, r in zip(y, bars, strict=True)]])
        for series in _series(mine):  # e.g. ELECTRA-Small and its 50%/25%/... trained checkpoints
            points = sorted((r.values["pretrain_flops"], r.values["glue_score"]) for r in series)
            axes.plot(*zip(*points, strict=True), color=style["color"], alpha=0.4, linewidth=1, zorder=2)
        for row in mine:
            # Partial versions sit on a rising line: label them below it, the rest above-right.
            offset = (3, -11) if _base(row, mine) else (6, 3)
            axes.annotate(_label(row, mine), (row.values["pretrain_flops"], row.values["glue_score"]),
                          xytext=offset, textcoords="offset points", fontsize=7.5, color=style["color"])
    axes.set_xscale("log")
    axes.set_xlabel("pre-training FLOPs (ELECTRA paper convention, log scale)")
    axes.set_ylabel("GLUE dev score (x100; bars: 95% interval)")
    axes.set_title("GLUE dev score vs pre-training compute")
    axes.grid(True, which="major", alpha=0.35)
    axes.grid(True, which="minor", axis="x", alpha=0.12)
    if shown:
        axes.legend(loc="lower right", fontsize=8)
        axes.margins(x=0.15, y=0.1)
    else:
        axes.text(0.5, 0.5, "no row has both pre-training FLOPs and a GLUE score", ha="center",
                  transform=axes.transAxes)
    if missing:
        names = ", ".join(r.label for r in missing[:4]) + (" ..." if len(missing) > 4 else "")
        # supxlabel, unlike figure.text, gets its own room from the constrained layout.
        # Wrapped: recipe tags make the names long, and one line ran off the figure's right edge.
        note = textwrap.fill("not plotted (pre-training FLOPs or GLUE unknown, no pre-training, or off the "
                             f"recipe): {names}", width=150)
        figure.supxlabel(note, x=0.01, ha="left", fontsize=7.5, color="#555")
    return figure


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
