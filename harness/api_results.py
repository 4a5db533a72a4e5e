"""What harness.run, evaluate and compare return: results.json and a comparison, as tables for notebooks.

Values keep results.json's units (fractions; SQuAD's percent) in `scores`, `summary` and `to_pandas()`;
`to_latex()` prints them as the run's own table does (x100, one decimal). pandas loads only when a frame
is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUMMARY_COLUMNS = ("median", "mean", "std", "best", "n", "ci_low", "ci_high", "ci_covers")
GLUE_ROW = ("GLUE", "paper convention")  # the paper's average of task medians (results.json `glue`)


@dataclass(frozen=True, repr=False)
class Results:
    """A finished run (or evaluation): its folder, results.json's body and the table the command prints."""

    output_dir: Path
    body: dict[str, Any] = field(repr=False)  # results.json (reports/results_schema.py's ResultsBody)
    table: str = field(default="", repr=False)

    @property
    def scores(self) -> list[dict[str, Any]]:
        """Each finished seed's dev scores: one dict per task, seed and split, its metrics beside them."""
        return [{"task": record["task"], "seed": record["seed"], "split": split, **metrics}
                for record in self.body["runs"] for split, metrics in record["metrics"].items()]

    @property
    def summary(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per task, each metric over the seeds: median, mean, std, best, n and its 95% interval (ci_low,
        ci_high, and what it covers) where the run has per-seed dev outputs."""
        return {task: {name: found for name, found in columns.items() if isinstance(found, dict)}
                for task, columns in self.body.get("summary", {}).items()}

    @property
    def diverged(self) -> list[dict[str, Any]]:
        """The (task, seed) whose training loss went non-finite: left out of every summary."""
        return list(self.body.get("diverged", []))

    def to_pandas(self, per_seed: bool = False):
        """The summary as a DataFrame, a row per task and metric (and GLUE's average where there is one),
        or with `per_seed` the scores, a row per task, seed and split."""
        import pandas

        if per_seed:
            return pandas.DataFrame(self.scores)
        return pandas.DataFrame([{"task": task, "metric": metric, **_statistics(found)}
                                 for task, metric, found in _summary_rows(self.body)],
                                columns=["task", "metric", *SUMMARY_COLUMNS])

    def to_latex(self) -> str:
        """The summary as a booktabs LaTeX tabular: median, mean [95% CI], std, best and seeds, as the run's
        table prints them (x100 unless the kind's scores are percent already)."""
        from harness.finetuning.table import with_interval

        scale = 1.0 if _percent(self.body) else 100.0
        lines = [r"\begin{tabular}{llrrrrr}", r"\toprule",
                 r"task & metric & median & mean [95\% CI] & std & best & seeds \\", r"\midrule"]
        for task, metric, found in _summary_rows(self.body):
            cells = [task, metric, _number(found.get("median"), scale),
                     with_interval(found.get("mean"), found, scale), _number(found.get("std"), scale),
                     _number(found.get("best"), scale), str(found.get("n", ""))]
            lines.append(" & ".join(_escaped(cell) for cell in cells) + r" \\")
        return "\n".join([*lines, r"\bottomrule", r"\end{tabular}"]) + "\n"

    def __str__(self) -> str:
        return self.table or f"results: {self.output_dir / 'results.json'}"

    def __repr__(self) -> str:
        seeds = self.body.get("seeds")
        return f"Results({str(self.output_dir)!r}, tasks={list(self.summary)}, seeds={seeds})"


@dataclass(frozen=True)
class Comparison:
    """harness compare's answer: per task A - B, its interval, p-value and verdict (harness/experiments)."""

    result: dict[str, Any]  # JSON-ready: rows, notes, and what the numbers mean

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self.result["rows"])

    def to_pandas(self):
        """A row per task (and GLUE's average), in points as the command prints them."""
        import pandas

        return pandas.DataFrame(self.rows)

    def to_latex(self) -> str:
        """The comparison as a booktabs LaTeX tabular, in points as the command prints it: A, B, A - B
        with its 95% interval, p-value and verdict per task."""
        lines = [r"\begin{tabular}{llrrrrl}", r"\toprule",
                 r"task & metric & A & B & A $-$ B [95\% CI] & p & verdict \\", r"\midrule"]
        for row in self.rows:
            p_value = r"$<$0.001" if row["p_value"] < 0.001 else f"{row['p_value']:.3f}"
            interval = f"{row['difference']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]"
            cells = [_escaped(row["task"]), _escaped(row["metric"]), f"{row['a']:.2f}", f"{row['b']:.2f}",
                     interval, p_value, _escaped(row["verdict"])]
            lines.append(" & ".join(cells) + r" \\")
        return "\n".join([*lines, r"\bottomrule", r"\end{tabular}"]) + "\n"

    def __str__(self) -> str:
        from harness.experiments.comparison import table

        return table(self.result)


def _summary_rows(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(task, metric, statistics) of every summarised metric, then GLUE's average (its `median` the
    average of task medians, its `mean` that of task means, which the interval is about)."""
    rows = [(task, metric, found) for task, columns in body.get("summary", {}).items()
            for metric, found in columns.items() if isinstance(found, dict)]
    glue = body.get("glue") or ({"score": body["glue_score"]} if "glue_score" in body else None)
    if glue is not None:
        average = {"median": glue["score"], "mean": glue.get("interval", {}).get("value"),
                   **{key: glue[key] for key in ("ci_low", "ci_high", "ci_covers") if key in glue}}
        rows.append((*GLUE_ROW, average))
    return rows


def _statistics(found: dict[str, Any]) -> dict[str, Any]:
    return {column: found.get(column) for column in SUMMARY_COLUMNS}


def _percent(body: dict[str, Any]) -> bool:
    """Whether the kind's scores are percent already (SQuAD), from results.json's format."""
    from harness import kinds

    return kinds.load(kinds.of_results(body["format"]).description).percent_scores


def _number(value: float | None, scale: float) -> str:
    return "" if value is None else f"{scale * value:.1f}"


def _escaped(text: str) -> str:
    """Text as LaTeX prints it: its special characters escaped."""
    return text.translate(LATEX)


LATEX = str.maketrans({"\\": r"\textbackslash{}", **{char: "\\" + char for char in "&%$#_{}"},
                       "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"})
