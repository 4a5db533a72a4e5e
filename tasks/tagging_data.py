"""Tagging data read and validated: CoNLL column files and JSON Lines, as sentences of words and tags.

CoNLL columns are read as conlleval and ELECTRA read them: whitespace-separated columns, the word first,
the tag in a chosen column (by default the last); a blank line ends a sentence, and a `-DOCSTART-` line
is a boundary, never a word (conlleval turns it into a boundary; ELECTRA's _get_labeled_sentences skips
it; the two agree where a blank line follows it, as in every CoNLL file). JSON Lines hold
{"tokens": [...], "tags": [...]} a line. Every problem is one UserError naming file:line and the fix,
raised before anything is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from tasks import tagging_metrics
from tasks.registry import TAGGING_CORPORA
from tasks.tagging_task import JSON_SUFFIXES, MODEL_SCHEME, NUM_EPOCHS, TaggingDescription, TaggingTask
from tasks.task_files import decode_utf8, require_file

PREFIXES = ("B", "I", "E", "S")
DOCSTART = "-DOCSTART-"


@dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]
    tags: tuple[str, ...] | None  # None: an unlabelled file
    lines: tuple[int, ...]  # each word's file line (JSON Lines: the sentence's line for each)

    @property
    def line(self) -> int:
        return self.lines[0]


@dataclass
class Split:
    """One file's sentences, where they came from and its digest."""

    name: str
    path: Path
    sentences: list[Sentence]
    digest: str

    @property
    def labelled(self) -> bool:
        return all(s.tags is not None for s in self.sentences)


@dataclass
class TaggingData:
    """The task resolved from the data, its splits (train, validation, [test]) and results.json's block."""

    task: TaggingTask
    splits: dict[str, Split]
    record: dict = field(default_factory=dict)

    def model_tags(self, split: str) -> list[list[str]]:
        """The split's gold tags converted to the model's scheme (BIOES, as ELECTRA trains)."""
        return [to_model_scheme(s.tags) for s in self.splits[split].sentences]


def to_model_scheme(tags) -> list[str]:
    """A sentence's tags as BIOES (ELECTRA: get_span_labels, then get_tags with LABEL_ENCODING)."""
    return tagging_metrics.tags_of(tagging_metrics.chunks(tags), len(tags), MODEL_SCHEME)


def shared_data_dir() -> Path:
    return Path(os.environ.get("SHARED_DIR", "../shared")) / "data"


def files_of(config: TaggingDescription, base: Path | None = None) -> dict[str, Path]:
    """The described files by split (train, validation, [test]); a named task's from its corpus folder."""
    if config.task:
        if config.train or config.dev:
            raise UserError(f"--task {config.task} reads its own corpus; drop --train/--dev, or drop --task")
        corpus = TAGGING_CORPORA[config.task]
        folder = Path(config.data_dir).expanduser() if config.data_dir else shared_data_dir() / corpus.folder
        found = {"train": folder / corpus.train, "validation": folder / corpus.scored}
        if not all(path.is_file() for path in found.values()):
            raise UserError(f"--task {config.task}: {corpus.train} and {corpus.scored} are not both in "
                            f"{folder}; "
                            "pass --data-dir with the corpus folder")
        if config.test:
            found["test"] = _path(config.test, base)
        return found
    if not config.train:
        raise UserError("pass --train FILE and --dev FILE (CoNLL columns or .jsonl), or --task chunk")
    if not config.dev:
        raise UserError("pass --dev FILE: a tagging task is scored on a dev file each epoch")
    files = {"train": config.train, "validation": config.dev, "test": config.test}
    return {split: _path(value, base) for split, value in files.items() if value}


def read(config: TaggingDescription, base: Path | None = None) -> TaggingData:
    """Read and validate the described data; `base`: the folder a task file's relative paths start from."""
    files = files_of(config, base)
    splits = {split: read_file(split, path, config.tag_column, labelled=split != "test")
              for split, path in files.items()}
    labelled = [splits[s] for s in ("train", "validation")]
    _check_scored(splits["validation"])
    scheme = config.scheme if config.scheme != "auto" else detect_scheme(labelled)
    for split in labelled:
        _check_scheme(split, scheme)
    # ELECTRA's label mapping: the sorted BIOES tags of every labelled split (_get_label_mapping)
    model_tags = {t for split in labelled for s in split.sentences for t in to_model_scheme(s.tags)}
    types = sorted({c[0] for split in labelled for s in split.sentences
                    for c in tagging_metrics.chunks(s.tags)})
    if not types:
        raise UserError(f"{splits['train'].path}: no chunks in its tags (every tag is O); check --tag-column")
    name = config.name or (config.task or files["train"].stem)
    from tasks.registry import GLUE_TASKS

    if name in GLUE_TASKS or (name in TAGGING_CORPORA and name != config.task):
        raise UserError(f"task name {name!r} is a named task's; pass --name with another name")
    max_length = TAGGING_CORPORA[config.task].max_length if config.task else TaggingTask.max_length
    task = TaggingTask(name, tuple(types), tuple(sorted(model_tags)), scheme, num_epochs=NUM_EPOCHS,
                       max_length=max_length)
    record: dict[str, Any] = {"task": task.record(), "description": _description(config, base), "files": {
        split: {"source": str(data.path), "sha256": data.digest, "sentences": len(data.sentences),
                "tokens": sum(len(s.words) for s in data.sentences)} for split, data in splits.items()}}
    if config.task:
        record["scored"] = {"split": "validation", "file": str(files["validation"]),
                            "note": TAGGING_CORPORA[config.task].note}
    return TaggingData(task, splits, record)


def _path(value: str, base: Path | None) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() or base is None else base / path


def read_file(split: str, path: Path, tag_column: int = -1, labelled: bool = True) -> Split:
    """One file's sentences; CoNLL columns unless it ends in .jsonl/.json."""
    require_file(split, path)
    data = path.read_bytes()
    text = decode_utf8(path, data)
    reader = _json_sentences if path.suffix.lower() in JSON_SUFFIXES else _conll_sentences
    sentences = reader(path, text, tag_column, labelled)
    if not sentences:
        raise UserError(f"{path}: no sentences in the {split} file; add some or drop the file")
    found = Split(split, path, sentences, hashlib.sha256(data).hexdigest())
    if labelled and not found.labelled:
        untagged = next(s.line for s in sentences if s.tags is None)
        raise UserError(f"{path}:{untagged}: a sentence without tags "
                        f"in the {split} file, which must be tagged")
    return found


def _conll_sentences(path: Path, text: str, tag_column: int, labelled: bool) -> list[Sentence]:
    sentences: list[Sentence] = []
    words: list[str] = []
    tags: list[str] = []
    lines: list[int] = []
    width, tagged = None, True

    def close():
        nonlocal words, tags, lines
        if words:
            sentences.append(Sentence(tuple(words), tuple(tags) if tagged else None, tuple(lines)))
        words, tags, lines = [], [], []

    for number, line in enumerate(text.splitlines(), start=1):
        columns = line.split()
        if not columns or columns[0] == DOCSTART:
            close()
            continue
        if width is None:
            width = len(columns)
            tagged = width > 1 or labelled  # an unlabelled test file may hold words alone
            if tagged:
                _tag_index(path, number, width, tag_column)
        elif len(columns) != width:
            raise UserError(f"{path}:{number}: {len(columns)} columns, but the file's first word line has "
                            f"{width}; every word line needs the same columns (a space inside a word?)")
        lines.append(number)
        words.append(columns[0])
        if tagged:
            tag = columns[_tag_index(path, number, width, tag_column)]
            _check_tag(path, number, tag)
            tags.append(tag)
    close()
    return sentences


def _tag_index(path: Path, number: int, width: int, tag_column: int) -> int:
    index = tag_column if tag_column >= 0 else width + tag_column
    if width < 2 or not 0 < index < width:
        raise UserError(f"{path}:{number}: tag column {tag_column} does not exist: the line has {width} "
                        f"column{'s' * (width != 1)} (the word is column 0); pass --tag-column between 1 and "
                        f"{width - 1}, or -1 for the last" if width > 1 else
                        f"{path}:{number}: a word without a tag column; add each word's tag after it")
    return index


def _check_tag(path: Path, number: int, tag: str) -> None:
    if tag == "O":
        return
    prefix, _, entity_type = tag.partition("-")
    if prefix not in PREFIXES or not entity_type:
        raise UserError(f"{path}:{number}: tag {tag!r} has an unknown prefix; tags are O or B-, I-, E-, S- "
                        "followed by a type (B-NP); is --tag-column the tag's column?")


def _json_sentences(path: Path, text: str, tag_column: int, labelled: bool) -> list[Sentence]:
    sentences = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number}: not JSON ({error.msg}); one object a line") from None
        if not isinstance(row, dict) or not isinstance(row.get("tokens"), list):
            raise UserError(f"{path}:{number}: no \"tokens\" list; each line is "
                            "{\"tokens\": [...], \"tags\": [...]}")
        words, tags = row["tokens"], row.get("tags")
        if not words:
            raise UserError(f"{path}:{number}: an empty sentence (no tokens); drop the line")
        if not all(isinstance(w, str) and w.strip() and not any(c.isspace() for c in w) for w in words):
            raise UserError(f"{path}:{number}: tokens must be non-empty strings without spaces")
        if tags is None and labelled:
            raise UserError(f"{path}:{number}: no \"tags\" list; each line is "
                            "{\"tokens\": [...], \"tags\": [...]}")
        if tags is not None:
            if not isinstance(tags, list) or len(tags) != len(words):
                count = len(tags) if isinstance(tags, list) else "no list of"
                raise UserError(f"{path}:{number}: {len(words)} tokens but {count} tags; one tag a token")
            for tag in tags:
                if not isinstance(tag, str):
                    raise UserError(f"{path}:{number}: tag {tag!r} is not a string")
                _check_tag(path, number, tag)
        sentences.append(Sentence(tuple(words), tuple(tags) if tags is not None else None,
                                  (number,) * len(words)))
    return sentences


def detect_scheme(splits: list[Split]) -> str:
    """BIOES where an E- or S- tag occurs; IOB1 where more chunks start with I- than with a B- that IOB1
    would not write (one after O, another type or the sentence start); else IOB2.

    A majority, not any I- start: hand-annotated IOB2 corpora hold a few stray I- starts (Europeana
    Newspapers' Dutch file: 92 against 7,010 B- starts), and one of them must not turn the predictions
    the run writes into IOB1. A real IOB1 file writes B- only between two chunks of one type.
    """
    i_starts = b_starts = 0
    for split in splits:
        for sentence in split.sentences:
            parts = [tagging_metrics.split_tag(t) for t in sentence.tags]  # (prefix, type) of each tag
            if any(prefix in ("E", "S") for prefix, _ in parts):
                return "BIOES"
            for _, start, _ in tagging_metrics.chunks(sentence.tags):
                if parts[start][0] == "I":
                    i_starts += 1
                elif start == 0 or parts[start - 1][1] != parts[start][1]:
                    b_starts += 1
    return "IOB1" if i_starts > b_starts else "IOB2"


def _check_scored(split: Split) -> None:
    """The scored file needs two sentences: intervals and `harness compare` resample its sentences. One is
    most often a file without blank lines between sentences (Europeana Newspapers' BIO files are one
    word stream), refused before training rather than after it."""
    if len(split.sentences) < 2:
        words = len(split.sentences[0].words)
        raise UserError(f"{split.path}: the dev file is one sentence of {words} words; scores' intervals "
                        "and harness compare resample its sentences, so it needs at least 2: put a blank "
                        "line after each sentence")


def _check_scheme(split: Split, scheme: str) -> None:
    if scheme == "BIOES":
        return
    for sentence in split.sentences:
        for offset, tag in enumerate(sentence.tags):
            if tag[:2] in ("E-", "S-"):
                raise UserError(f"{split.path}:{sentence.lines[offset]}: tag {tag!r} is not in scheme "
                                f"{scheme} "
                                "(no E- or S- tags); pass --scheme BIOES")


def _description(config: TaggingDescription, base: Path | None) -> dict:
    """The description with its files' absolute paths: what an export re-reads the dev split from."""
    described = dataclasses.asdict(config)
    for key in ("train", "dev", "test", "data_dir"):
        if described[key]:
            described[key] = str(_path(described[key], base).resolve())
    return described


def description_of(record: dict) -> TaggingDescription:
    """A results.json data block's description, as read() takes it."""
    if not isinstance(record, dict) or "description" not in record:
        raise UserError("results.json does not describe the tagging task's files; fine-tune again")
    return TaggingDescription(**record["description"])
