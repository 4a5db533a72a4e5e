"""The one registry of named tasks: every GLUE task as a data row, the SQuAD versions, the tagging corpora.

Names are the `datasets` config names. CLI choices, default epochs, metrics, splits and the
test-server file names all come from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foundation.infra.errors import UserError


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: where its text and labels live, how it is scored, how the server wants it."""

    name: str
    dir_name: str  # folder in a classic glue_data directory
    hub_columns: tuple[str, ...]  # text columns in nyu-mll/glue
    tsv_columns: tuple[str, ...]  # the same text columns in the glue_data TSV header
    label_names: tuple[str, ...] | None  # label strings as in the TSVs and the server; None = regression
    metrics: tuple[str, ...]
    tsv_label: str = "label"
    tsv_index: str = "index"
    num_epochs: int = 3
    max_length: int = 128  # tokens; the `max_length` setting overrides it
    # canonical split -> glue_data file; "test*" splits have no labels and feed the server files
    files: dict[str, str] = field(default_factory=lambda: {
        "train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"})
    submission: dict[str, str] = field(default_factory=dict)  # test split -> server file name
    headerless: tuple[str, ...] = ()  # column names for files that ship without a header
    predicted_by: str | None = None  # AX has no training data: the MNLI model predicts it
    # The metric the ELECTRA paper reports for the task (on its first dev split: MNLI matched).
    paper_metric: str | None = "accuracy"
    in_glue_average: bool = True  # the paper's GLUE score leaves WNLI (and AX, which has no dev set) out
    # Sentence order carries no meaning: with the `double_unordered` setting the training set holds
    # every pair in both orders (ELECTRA's MRPC and STS classes, classification_tasks.py).
    double_unordered: bool = False
    # Regression targets are learnt divided by this under head=electra: ELECTRA's (score - 0) / 5 for STS-B
    # (RegressionTask._add_features); predictions are multiplied back.
    target_scale: float = 1.0

    def __post_init__(self):
        if self.paper_metric is not None and self.paper_metric not in self.metrics:
            raise ValueError(f"{self.name}: paper_metric {self.paper_metric!r} is not among {self.metrics}")

    @property
    def paper_label(self) -> str:
        """The paper metric's key in a results summary: 'mcc', or 'validation_matched_accuracy' (MNLI)."""
        return self.paper_metric if len(self.dev_splits) == 1 else f"{self.dev_splits[0]}_{self.paper_metric}"

    @property
    def is_regression(self) -> bool:
        return self.label_names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)

    @property
    def dev_splits(self) -> tuple[str, ...]:
        return tuple(s for s in self.files if s.startswith("validation"))

    @property
    def test_splits(self) -> tuple[str, ...]:
        return tuple(s for s in self.files if s.startswith("test"))


_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")
_MNLI = ("entailment", "neutral", "contradiction")

GLUE_TASKS: dict[str, GlueTask] = {t.name: t for t in [
    GlueTask("cola", "CoLA", ("sentence",), ("sentence",), _BINARY, ("mcc",), paper_metric="mcc",
             headerless=("source", "label", "original_label", "sentence"), submission={"test": "CoLA.tsv"}),
    GlueTask("sst2", "SST-2", ("sentence",), ("sentence",), _BINARY, ("accuracy",),
             submission={"test": "SST-2.tsv"}),
    GlueTask("mrpc", "MRPC", ("sentence1", "sentence2"), ("#1 String", "#2 String"), _BINARY,
             ("f1", "accuracy"), tsv_label="Quality", submission={"test": "MRPC.tsv"}, double_unordered=True),
    GlueTask("stsb", "STS-B", ("sentence1", "sentence2"), ("sentence1", "sentence2"), None,
             ("pearson", "spearman"), tsv_label="score", num_epochs=10, paper_metric="spearman",
             submission={"test": "STS-B.tsv"}, double_unordered=True, target_scale=5.0),
    GlueTask("qqp", "QQP", ("question1", "question2"), ("question1", "question2"), _BINARY,
             ("f1", "accuracy"), tsv_label="is_duplicate", tsv_index="id", submission={"test": "QQP.tsv"}),
    GlueTask("mnli", "MNLI", ("premise", "hypothesis"), ("sentence1", "sentence2"), _MNLI,
             ("accuracy",), tsv_label="gold_label",
             files={"train": "train.tsv", "validation_matched": "dev_matched.tsv",
                    "validation_mismatched": "dev_mismatched.tsv", "test_matched": "test_matched.tsv",
                    "test_mismatched": "test_mismatched.tsv"},
             submission={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}),
    GlueTask("qnli", "QNLI", ("question", "sentence"), ("question", "sentence"), _NLI, ("accuracy",),
             submission={"test": "QNLI.tsv"}),
    GlueTask("rte", "RTE", ("sentence1", "sentence2"), ("sentence1", "sentence2"), _NLI, ("accuracy",),
             num_epochs=10, submission={"test": "RTE.tsv"}),
    GlueTask("wnli", "WNLI", ("sentence1", "sentence2"), ("sentence1", "sentence2"), _BINARY,
             ("accuracy",), submission={"test": "WNLI.tsv"}, in_glue_average=False),
    GlueTask("ax", "diagnostic", ("premise", "hypothesis"), ("sentence1", "sentence2"), _MNLI, (),
             files={"test": "diagnostic.tsv"}, submission={"test": "AX.tsv"}, predicted_by="mnli",
             paper_metric=None, in_glue_average=False),
]}

# The one GLUE-average convention (the ELECTRA paper's), used by tables, results.json, MLflow and
# the leaderboard: each task's paper_metric on its first dev split, WNLI and AX left out.
GLUE_AVERAGE_TASKS = tuple(name for name, task in GLUE_TASKS.items() if task.in_glue_average)
GLUE_CONVENTION = "paper convention: " + ", ".join(
    f"{GLUE_TASKS[name].dir_name}{'-m' if len(GLUE_TASKS[name].dev_splits) > 1 else ''} "
    f"{GLUE_TASKS[name].paper_metric}" for name in GLUE_AVERAGE_TASKS) + "; WNLI excluded"


# The files the GLUE server wants in one zip, in registry order (CoLA.tsv ... AX.tsv): 11 of them.
SERVER_FILES = tuple(file for task in GLUE_TASKS.values() for file in task.submission.values())


def predicted_with(name: str) -> tuple[GlueTask, ...]:
    """Tasks without training data whose test set the `name` model predicts (MNLI's: AX)."""
    return tuple(task for task in GLUE_TASKS.values() if task.predicted_by == name)


def parse_tasks(spec: str) -> list[GlueTask]:
    """Tasks named in a comma list ("all": every task, AX too, for a full server zip), in registry order."""
    names = [n.strip().lower() for n in spec.split(",") if n.strip()]
    if names == ["all"]:
        names = list(GLUE_TASKS)
    unknown = [n for n in names if n not in GLUE_TASKS]
    if unknown or not names:
        raise UserError(f"unknown task {', '.join(map(repr, unknown)) or repr(spec)}; "
                        f"choose from {', '.join(GLUE_TASKS)} or all")
    for name in names:
        needs = GLUE_TASKS[name].predicted_by
        if needs and needs not in names:
            raise UserError(f"task {name!r} is predicted with the {needs.upper()} model; "
                            f"add {needs} to --tasks")
    return [task for name, task in GLUE_TASKS.items() if name in names]


@dataclass(frozen=True)
class SquadTask:
    """One SQuAD version: how long it trains, how long its windows are, which metrics summarise it."""

    name: str  # the Hub dataset's name: squad (v1.1), squad_v2 (v2.0)
    version: str
    metrics: tuple[str, ...]  # the official script's keys, percent; summarised over seeds
    num_epochs: int = 2
    max_length: int = 512  # window length in tokens, ELECTRA's for SQuAD (configure_finetuning.py)

    @property
    def has_unanswerable(self) -> bool:
        return self.version == "2.0"


SQUAD_TASKS: dict[str, SquadTask] = {t.version: t for t in [
    SquadTask("squad", "1.1", ("exact_match", "f1")),
    SquadTask("squad_v2", "2.0", ("exact", "f1", "best_exact", "best_f1")),
]}


def squad_task(version: str) -> SquadTask:
    """The SQuAD task of a version string, or a UserError listing the versions."""
    if version not in SQUAD_TASKS:
        raise UserError(f"unknown SQuAD version {version!r}; choose one of {', '.join(SQUAD_TASKS)}")
    return SQUAD_TASKS[version]


@dataclass(frozen=True)
class NamedCorpus:
    """A named tagging task on a corpus in ../shared/data (ELECTRA's chunk)."""

    name: str
    folder: str  # under the shared data folder
    train: str
    scored: str  # the file scored each epoch and reported
    max_length: int
    note: str


# ELECTRA's chunk task: CoNLL-2000, which has no dev set; ELECTRA and the shared task report test-set F1,
# so the test file is the scored split (results.json records it as such).
TAGGING_CORPORA: dict[str, NamedCorpus] = {"chunk": NamedCorpus(
    "chunk", "conll2000", "train.txt", "test.txt", 256,
    "CoNLL-2000 has no dev set: the test file is scored each epoch and reported, as ELECTRA reports it "
    "(test F1)")}
