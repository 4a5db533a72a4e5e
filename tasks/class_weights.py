"""Class weights for an imbalanced classification or multi-label task: the setting's forms and the weights
a training set gets (the weighted loss is the task adapter's, tasks/text.py).

`class_weights` (tasks/config.py) is `none` (ELECTRA's unweighted loss), `balanced`, or LABEL=WEIGHT,...
by label name. Torch-free: tasks/config.py checks the setting's form for the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from foundation.infra.errors import UserError

if TYPE_CHECKING:  # numpy-free at import too
    import numpy as np

NONE, BALANCED = "none", "balanced"
EXAMPLE = "e.g. neg=1,pos=19"


def parse_errors(value: str) -> list[str]:
    """What is wrong with a class_weights value's form (labels are checked against the data later)."""
    if value in (NONE, BALANCED):
        return []
    try:
        explicit(value)
    except ValueError as error:
        return [str(error)]
    return []


def explicit(value: str) -> dict[str, float]:
    """{label: weight} of a LABEL=WEIGHT,... value; ValueError, one line, naming the bad item."""
    weights: dict[str, float] = {}
    for item in (part.strip() for part in value.split(",")):
        label, sep, raw = item.rpartition("=")
        label = label.strip()
        if not sep or not label:
            raise ValueError(f"class_weights item {item!r} is not LABEL=WEIGHT; pass none, balanced or "
                             f"weights by label name, {EXAMPLE}")
        try:
            weight = float(raw)
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"class_weights weight {raw.strip()!r} of label {label!r} is not a positive "
                             f"number; {EXAMPLE}")
        if label in weights:
            raise ValueError(f"class_weights names label {label!r} twice; give it once")
        weights[label] = weight
    return weights


def weights_for(value: str, names: Sequence[str], labels: Sequence,
                multilabel: bool) -> tuple[float, ...] | None:
    """Each label's weight, in label order, for training labels `labels` (class ids, or 0/1 rows for
    multi-label); None for `none`."""
    if value == NONE:
        return None
    if value != BALANCED:
        given = explicit(value)
        unknown = [label for label in given if label not in names]
        if unknown:
            raise UserError(f"class_weights names label {unknown[0]!r}, which the training data does not "
                            f"have; its labels are {', '.join(names)}")
        return tuple(given.get(name, 1.0) for name in names)  # an unlisted label keeps weight 1
    return _pos_weights(names, labels) if multilabel else _balanced(names, labels)


def _balanced(names: Sequence[str], labels: Sequence[int]) -> tuple[float, ...]:
    """scikit-learn's balanced weights: rows / (classes * the class's rows)."""
    import numpy as np
    from sklearn.utils.class_weight import compute_class_weight

    ids = np.asarray(labels)
    _require_rows(names, np.bincount(ids, minlength=len(names)))
    weights = compute_class_weight("balanced", classes=np.arange(len(names)), y=ids)
    return tuple(float(w) for w in weights)


def _pos_weights(names: Sequence[str], rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Each label's negatives / positives (BCEWithLogitsLoss's pos_weight); a label every row has keeps 1,
    as there is nothing to balance."""
    import numpy as np

    targets = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names))
    positives = targets.sum(axis=0)
    _require_rows(names, positives)
    negatives = len(targets) - positives
    return tuple(float(n / p) if n > 0 else 1.0 for n, p in zip(negatives, positives, strict=True))


def _require_rows(names: Sequence[str], counts: np.ndarray) -> None:
    missing = [name for name, count in zip(names, counts, strict=True) if count == 0]
    if missing:
        raise UserError(f"class_weights=balanced: label {missing[0]!r} has no training row (after "
                        "max_train_examples); raise max_train_examples or give weights by label name")

