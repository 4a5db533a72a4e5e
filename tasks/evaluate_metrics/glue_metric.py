"""GLUE dev metrics exactly as electra-harness reports them, as an `evaluate` module.

The config name is the GLUE task; predictions and references are class ids, or scores for stsb. Values are
fractions, plus `score`, the mean of the task's metrics (its GLUE score). The implementation is
tasks.metrics; this module only wraps it, so a user can load the metric the harness reports:

    evaluate.load(str(tasks.evaluate_metrics.GLUE_METRIC), "mrpc").compute(
        predictions=[1, 0, 0, 0], references=[1, 1, 1, 0])  # {'f1': 0.5, 'accuracy': 0.5, 'score': 0.5}

evaluate copies this file into its modules cache and checks each import line's package is installed.
"""

import datasets
import evaluate

from tasks import metrics
from tasks.registry import GLUE_TASKS

_SCORED = {name: task for name, task in GLUE_TASKS.items() if task.metrics}

_DESCRIPTION = "GLUE dev metrics as electra-harness computes them (fractions in [0, 1], plus `score`)."
_CITATION = """\
@inproceedings{wang2019glue,
  title={GLUE: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and
          Bowman, Samuel R.},
  booktitle={International Conference on Learning Representations},
  year={2019}
}
"""
_INPUTS = """\
Args:
    predictions: predicted class ids (float scores for stsb).
    references: gold class ids (float scores for stsb).
Returns:
    the task's metrics (accuracy, f1, mcc, pearson, spearman as it uses them) and `score`, their mean.
"""


class GlueMetric(evaluate.Metric):
    """The harness's GLUE metric of one task (the config name)."""

    def _info(self):
        if self.config_name not in _SCORED:
            raise KeyError(f"unknown GLUE task {self.config_name!r}; choose one of {', '.join(_SCORED)}")
        value = "float64" if _SCORED[self.config_name].is_regression else "int64"
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_INPUTS,
            features=datasets.Features({"predictions": datasets.Value(value),
                                        "references": datasets.Value(value)}))

    def _compute(self, predictions, references):
        return metrics.compute(_SCORED[self.config_name].metrics, predictions, references)
