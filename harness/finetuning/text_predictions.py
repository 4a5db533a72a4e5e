"""A text run's prediction lines: each row's key, its input text, gold label and prediction, by name."""

from __future__ import annotations

from datasets import Dataset

# `task`: a tasks.text_task.TextTask (not imported: only the text kind's own modules import it)
FIXED = ("id", "row", "label", "prediction")  # a text column of one of these names is written input_NAME


def lines(task, rows: Dataset, predicted: list, labelled: bool) -> list[dict]:
    """One dict per row of `rows` (text_a, [text_b], label, idx: tasks/text_data.py) in order: `id` and `row`
    its 0-based row in the file it was read from (a drawn dev split: the training file), the text columns by
    name, `label` the gold label where the split has one, `prediction`; a regression's prediction also under
    the label column's name (unless it is one of FIXED)."""
    texts = [("input_" + name if name in FIXED else name, column)
             for name, column in zip(task.text_columns, ("text_a", "text_b"), strict=False)]
    golds = [_gold(task, value) for value in rows["label"]] if labelled else [None] * len(rows)
    written = []
    for row, gold, prediction in zip(rows, golds, predicted, strict=True):
        line = {"id": row["idx"], "row": row["idx"]} | {name: row[column] for name, column in texts}
        if labelled:
            line["label"] = gold
        line["prediction"] = prediction
        if task.is_regression and task.label_column not in FIXED:
            line.setdefault(task.label_column, prediction)
        written.append(line)
    return written


def _gold(task, value):
    """A gold label as the file had it: a name, a number (regression) or a list of names (multi-label)."""
    if task.is_regression:
        return float(value)
    if task.is_multilabel:
        return [name for name, hot in zip(task.label_names, value, strict=True) if hot]
    return task.label_names[int(value)]
