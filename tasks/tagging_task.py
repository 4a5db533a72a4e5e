"""Tagging (chunking, NER) on CoNLL column or JSON Lines files: its description (flags or a TOML task
file, the same keys) and the task it resolves to once the data is read (types, labels, metrics).

Torch-free, so the CLI can build its help and check a description without loading torch. Reading and
validating the files is tasks/tagging_data.py; the conlleval metric tasks/tagging_metrics.py; features,
head and scoring tasks/tagging.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from foundation.infra.settings import Flag, setting
from tasks.kind_text import TEXT_ONLY_SETTINGS, CommandText, task_row
from tasks.read_task import ReadTask
from tasks.registry import TAGGING_CORPORA
from tasks.task_files import recorded_digests

Scheme = Literal["auto", "IOB1", "IOB2", "BIOES"]

# ELECTRA trains every tagging task on BIOES tags whatever the file's scheme (finetune/tagging/
# tagging_tasks.py: LABEL_ENCODING = "BIOES"), 3 epochs (configure_finetuning.py: num_train_epochs), 128
# tokens (max_seq_length), 256 for chunk.
MODEL_SCHEME = "BIOES"
NUM_EPOCHS = 3
MAX_LENGTH = 128
# conlleval's figures: phrase-level F1 (the headline), precision, recall; token accuracy of the written tags
METRICS = ("f1", "precision", "recall", "accuracy")
HEADLINE = "f1"
JSON_SUFFIXES = (".jsonl", ".json")

RUN_EPILOG = """examples:
  harness run tagging --model minilm-l6 --task chunk --seeds 3   # CoNLL-2000 in ../shared/data
  harness run tagging --model M --train ner/train.txt --dev ner/dev.txt --test ner/test.txt
  harness run tagging --model M --train train.jsonl --dev dev.jsonl max_train_examples=2000

CoNLL column files (word first, the tag in --tag-column, by default the last; a blank line between
sentences; -DOCSTART- lines are boundaries) or JSON Lines ({"tokens": [...], "tags": [...]}); tags in
IOB1, IOB2 or BIOES. As ELECTRA: trained on BIOES tags, each word's first sub-token labelled; scored by
conlleval's phrase-level F1 (precision, recall, token accuracy, F1 per type beside it). A sentence
longer than max_length is split into windows of whole words (--long-sentences refuse: refused).
"""
SEARCH_EPILOG = """examples:
  harness search tagging --model M --task chunk --trials 20 max_train_examples=2000
  harness run tagging --model M --task chunk --params-from runs/search/tagging-chunk-M/best_params.json
"""
COMMANDS = {
    "run": CommandText(
        "",  # the kind's row in harness/kinds.py says it
        "Fine-tune a token classifier on CoNLL column or JSON Lines files (or --task chunk) with ELECTRA's "
        "recipe; writes results.json, predicted tags per split, the models, logs to MLflow, prints "
        "conlleval's F1 with intervals.", RUN_EPILOG,
        ("settings (key=value or a TOML --config file; unset ones follow ELECTRA's tagging recipe: 3 epochs, "
         "128 tokens, 256 for chunk):",)),
    "eval": CommandText(
        "a token classifier (chunking, NER, your tagged files)",
        "Score a fine-tuned token classifier on a tagging task, described as for harness run tagging "
        "(conlleval's F1)."),
    "search": CommandText(
        "search a tagging task's hyperparameters (conlleval F1)",
        "Run trials of an Optuna study on a tagging task, described as for harness run tagging; each trial "
        "is scored by the mean dev F1 over its trial seeds.", SEARCH_EPILOG),
}


@dataclass(frozen=True)
class TaggingDescription:
    """A tagging task, described once: the same keys as flags or in a TOML --task-file."""

    task: str = setting("", role="recipe", flag=Flag("--task", "NAME", choices=tuple(TAGGING_CORPORA)), help=(
        "a named corpus instead of files: chunk (CoNLL-2000 in DATA_DIR, default $SHARED_DIR/data/conll2000; "
        "scored on its test file, as ELECTRA reports it)"))
    data_dir: str = setting("", role="recipe", flag=Flag("--data-dir", "DIR"), help=(
        "with --task: the corpus folder"))
    train: str = setting("", role="recipe", flag=Flag("--train", "FILE"), help=(
        "training file: CoNLL columns (word first, a blank line between sentences) or .jsonl with "
        "{\"tokens\": [...], \"tags\": [...]} per line (a task file's paths are relative to it)"))
    dev: str = setting("", role="recipe", flag=Flag("--dev", "FILE"), help="dev file scored each epoch")
    test: str = setting("", role="output", flag=Flag("--test", "FILE"), help=(
        "file to predict after training (its tags, if any, are not used)"))
    tag_column: int = setting(-1, role="recipe", flag=Flag("--tag-column", "N"), help=(
        "CoNLL files: the tag's column, counted from 0 (the word) or from the end when negative; -1: the "
        "last, as conlleval and ELECTRA read it"))
    scheme: Scheme = setting("auto", role="recipe", flag=Flag("--scheme"), help=(
        "the files' tag scheme; auto: BIOES where an E- or S- tag occurs, IOB1 where most chunks start "
        "with I-, else IOB2. Chunks are read as conlleval reads them; predictions are written in this "
        "scheme"))
    long_sentences: Literal["split", "refuse"] = setting(
        "split", role="recipe", flag=Flag("--long-sentences"), help=(
        "a sentence longer than max_length tokens: split into windows of whole words, or refused"))
    name: str = setting("", role="recipe", flag=Flag("--name", "NAME"), help=(
        "the task's name in results, leaderboard and bundles; default: the train file's stem"))

    percent_scores: ClassVar[bool] = False
    refused: ClassVar[tuple[str, ...]] = TEXT_ONLY_SETTINGS  # not in its --help; refused if set
    pipeline_tag: ClassVar[str] = "token-classification"  # the Hub's task (a model card's pipeline_tag)
    # A named corpus's Hub data set (id, config, name as a card shows it); your own files have none.
    hub_datasets: ClassVar[dict[str, tuple[str, str | None, str]]] = {
        "chunk": ("eriktks/conll2000", None, "CoNLL-2000 chunking")}
    commands: ClassVar[dict[str, CommandText]] = COMMANDS

    def __post_init__(self):
        if self.task and self.task not in TAGGING_CORPORA:
            raise ValueError(f"unknown task {self.task!r}; choose one of {', '.join(TAGGING_CORPORA)}")
        if self.tag_column == 0:
            raise ValueError("tag_column 0 is the word; the tag is a later column (default -1: the last)")

    def grid_tasks(self) -> tuple[str, ...]:
        """The one task a grid trains per model and seed (results.json's name, as tasks/tagging_data.py
        names it)."""
        return (self.name or self.task or Path(self.train).stem,)

    def for_task(self, name: str) -> TaggingDescription:
        """The description of grid_tasks()'s one task: itself."""
        return self

    @property
    def output_name(self) -> str:
        """The word after the model's name in a default output folder: the task's name or its data's."""
        return self.name or self.task or Path(self.train or "data").stem

    @staticmethod
    def listed() -> list[str]:
        """`harness tasks`' lines for the named tagging corpora."""
        return [task_row(name, ",".join(METRICS), "phrase tags (conlleval)", NUM_EPOCHS,
                         f"harness run tagging --task {name} ({corpus.folder})")
                for name, corpus in TAGGING_CORPORA.items()]

    @staticmethod
    def fingerprint(data: dict | None) -> dict[str, tuple[str, str]]:
        """What results.json records of the data a run read, for `harness compare`: each file's sha256."""
        return recorded_digests(data)


@dataclass(frozen=True)
class TaggingTask(ReadTask):
    """A tagging task read from its data: what the loop, the scorer, results and bundles need to know.

    Its attributes beside GLUE's (tasks/registry.GlueTask) let the same tables, intervals and bundles
    serve it: dev_splits, paper_metric (the headline), num_labels."""

    name: str
    types: tuple[str, ...]  # chunk types (NP, PER, ...), sorted
    label_names: tuple[str, ...]  # the model's BIOES tags, sorted as ELECTRA's label mapping
    scheme: str  # the files' scheme: predictions are written in it
    metrics: tuple[str, ...] = METRICS
    headline: str = HEADLINE
    num_epochs: float = NUM_EPOCHS
    max_length: int = MAX_LENGTH
    kind: str = "tagging"
    is_regression: bool = False
    is_multilabel: bool = False
    target_scale: float = 1.0
    double_unordered: bool = False
    predicted_by: None = None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def all_metrics(self) -> tuple[str, ...]:
        """The summary's metrics: conlleval's, then each type's F1."""
        return self.metrics + tuple(f"f1_{t}" for t in self.types)

    def record(self) -> dict:
        """results.json's and the bundle's description of the task."""
        return {"name": self.name, "kind": self.kind, "types": list(self.types),
                "label_names": list(self.label_names), "scheme": self.scheme,
                "metrics": list(self.all_metrics),
                "headline": self.headline, "max_length": self.max_length}

    @classmethod
    def from_record(cls, record: dict) -> TaggingTask:
        return cls(record["name"], tuple(record["types"]), tuple(record["label_names"]), record["scheme"],
                   max_length=record.get("max_length", MAX_LENGTH))
