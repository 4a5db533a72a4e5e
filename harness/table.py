"""The results table printed at the end of `harness run glue` (scores x100, as the paper prints them)."""

from __future__ import annotations


def glue_table(results: dict) -> str:
    header = ("task", "metric", "median", "mean ± std", "best", "seeds", "train time", "train ex/s")
    rows = []
    for task, summary in results["summary"].items():
        for metric, stats in summary.items():
            if not isinstance(stats, dict):
                continue
            timing = (_duration(summary["train_time_s"]), f"{summary['train_examples_per_s']:.1f}")
            rows.append((task if metric == "score" else "", metric, f"{100 * stats['median']:.1f}",
                         f"{100 * stats['mean']:.1f} ± {100 * stats['std']:.1f}",
                         f"{100 * stats['best']:.1f}", str(stats["n"]),
                         *(timing if metric == "score" else ("", ""))))
    rows.append(("GLUE", "mean of task medians", f"{100 * results['glue_score']:.1f}", "", "", "", "", ""))
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             for row in (header, *rows)]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m{seconds:02d}s"
