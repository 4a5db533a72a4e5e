"""SQuAD scores exactly as electra-harness reports them, as an `evaluate` module.

The config name is the task: squad (v1.1) or squad_v2 (v2.0). Inputs are shaped as for the Hub's `squad`
and `squad_v2` metrics: predictions {"id", "prediction_text"} (plus "no_answer_probability" for squad_v2:
the null odds, higher meaning more likely unanswerable), references {"id", "answers": {"text",
"answer_start"}}. Scores are the official scripts' (percent) plus `score`, the F1. The implementation is
tasks.squad_metrics; this module only wraps it, so a user can load the metric the harness reports:

    evaluate.load(str(tasks.evaluate_metrics.SQUAD_METRIC), "squad_v2").compute(
        predictions=..., references=..., null_threshold=0.0)

evaluate copies this file into its modules cache and checks each import line's package is installed.
"""

import datasets
import evaluate

from tasks import squad_metrics
from tasks.registry import SQUAD_TASKS

_VERSIONS = {task.name: task.version for task in SQUAD_TASKS.values()}

_DESCRIPTION = "SQuAD 1.1 and 2.0 scores as electra-harness computes them (official, plus `score`)."
_CITATION = """\
@inproceedings{rajpurkar2018know,
  title={Know What You Don't Know: Unanswerable Questions for SQuAD},
  author={Rajpurkar, Pranav and Jia, Robin and Liang, Percy},
  booktitle={ACL},
  year={2018}
}
"""
_INPUTS = """\
Args:
    predictions: {"id", "prediction_text"} per question, plus "no_answer_probability" for squad_v2.
    references: {"id", "answers": {"text": [...], "answer_start": [...]}} per question.
    null_threshold (squad_v2): above it a question counts as answered ""; default 0.0 (the harness's).
Returns:
    squad: exact_match, f1, score. squad_v2: exact, f1, total, HasAns_*, NoAns_*, best_*, score.
"""


class SquadMetric(evaluate.Metric):
    """The harness's SQuAD metric of one version (the config name: squad or squad_v2)."""

    def _info(self):
        if self.config_name not in _VERSIONS:
            raise KeyError(f"unknown SQuAD task {self.config_name!r}; choose one of {', '.join(_VERSIONS)}")
        prediction = {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")}
        if _VERSIONS[self.config_name] == "2.0":
            prediction["no_answer_probability"] = datasets.Value("float64")
        answers = {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
        reference = {"id": datasets.Value("string"), "answers": datasets.Sequence(answers)}
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_INPUTS,
            features=datasets.Features({"predictions": prediction, "references": reference}))

    def _compute(self, predictions, references, null_threshold=0.0):
        answers = {p["id"]: p["prediction_text"] for p in predictions}
        null_odds = None
        if _VERSIONS[self.config_name] == "2.0":
            null_odds = {p["id"]: p["no_answer_probability"] for p in predictions}
        return squad_metrics.squad_scores(_VERSIONS[self.config_name], answers, references, null_odds,
                                          null_threshold=null_threshold)
