"""The face a task read from files (your own text, tagging) shows code written for GLUE's rows. Torch-free."""

from __future__ import annotations


class ReadTask:
    """What a task read from files (your own text, tagging) shows the tables, intervals and bundles that
    were written for GLUE's registry rows: one dev split, and its headline in the place of the paper's
    metric."""

    headline: str

    @property
    def dev_splits(self) -> tuple[str, ...]:
        return ("validation",)

    @property
    def paper_metric(self) -> str:
        return self.headline

    @property
    def paper_label(self) -> str:
        return self.headline
