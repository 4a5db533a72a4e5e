"""What GLUE's and your own text's exports share: a sequence classifier's head and outputs."""

from __future__ import annotations

from pathlib import Path

import transformers

from harness.deploy.exporting import Exporter


class ClassificationExporter(Exporter):
    """A sequence classifier (or regressor): one row of logits per text or pair."""

    pipeline = "sequence-classification"
    architecture = "ForSequenceClassification"
    wanted = "a classifier from `harness run glue`"

    def model_class(self):
        return transformers.AutoModelForSequenceClassification

    def output_names(self, path: Path) -> tuple[str, ...]:
        return ("logits",)
