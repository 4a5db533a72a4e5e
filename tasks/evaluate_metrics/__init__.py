"""The harness's GLUE and SQuAD metrics as local `evaluate` modules, and the scoring calls that use them.

GLUE_METRIC and SQUAD_METRIC are module files for `evaluate.load(str(path), config_name)`, which works
offline (HF_HUB_OFFLINE=1): a user loads exactly the metric the harness reports. The harness scores
through them too, so the two cannot drift; the pure functions in tasks.metrics and tasks.squad_metrics
are the implementation both wrap.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tasks import squad_metrics
from tasks.registry import GlueTask, SquadTask

GLUE_METRIC = Path(__file__).with_name("glue_metric.py")
SQUAD_METRIC = Path(__file__).with_name("squad_metric.py")


@functools.cache
def load(path: Path, config_name: str):
    """The evaluate module at path for config_name, loaded once per process."""
    # Imported here, not at the top: `import evaluate` also imports transformers.pipelines (seconds),
    # which only processes that score should pay. keep_in_memory: no arrow files in the metrics cache.
    import evaluate

    return evaluate.load(str(path), config_name, keep_in_memory=True)


def glue_scores(task: GlueTask, predictions: Sequence, references: Sequence) -> dict[str, float]:
    """A GLUE task's metrics (fractions) plus `score`, their mean, through the harness's glue metric."""
    return load(GLUE_METRIC, task.name).compute(predictions=list(predictions), references=list(references))


def squad_scores(task: SquadTask, predictions: Mapping[str, str], examples: Iterable[Mapping],
                 null_odds: Mapping[str, float] | None = None,
                 null_threshold: float = 0.0) -> dict[str, float]:
    """A SQuAD task's official scores (percent) plus `score`, the F1, through the harness's squad metric.

    predictions and null_odds (read for v2.0 only, where they are needed) map question ids to answers and
    odds; examples are rows with "id" and "answers", as `tasks.squad_data` loads them.
    """
    if not task.has_unanswerable:
        null_odds = None  # postprocess gives v1.1 an empty dict: [CLS] is never trained as an answer there
    elif null_odds is None:
        raise ValueError(f"{task.name} scores need null odds for every question; got none")
    examples = list(examples)
    # Missing ids are the caller's bug: name them (UserError) before evaluate's row-count mismatch would.
    squad_metrics.check_covered(predictions, [e["id"] for e in examples], null_odds)
    rows = []
    for example in examples:
        row = {"id": example["id"], "prediction_text": predictions[example["id"]]}
        if task.has_unanswerable:
            row["no_answer_probability"] = null_odds[example["id"]]
        rows.append(row)
    references = [{"id": e["id"], "answers": {"text": list(e["answers"]["text"]),
                                              "answer_start": list(e["answers"]["answer_start"])}}
                  for e in examples]
    return load(SQUAD_METRIC, task.name).compute(predictions=rows, references=references,
                                                 null_threshold=null_threshold)
