"""`--corpus glue:sst2,stsb,rte`: the named GLUE tasks' training inputs as pre-training text.

Only the train split is read, through the fine-tuning loaders (tasks/glue_data.py), never dev or
test: pre-training on them would leak what the run is later scored on. Each task becomes one
document of a text file and each input (a sentence, or each side of a pair) one paragraph, so the
packer (pretrain/packing.py), which fills an example from consecutive paragraphs of a document,
packs short texts into whole sequences instead of padding each one. The file is named by a hash of
its text in the cache folder, so a rerun reuses it (and the tokenised caches keyed on it) and
changed data gives a new one; pretrain_meta.json records tasks, split, counts and that hash.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from foundation.infra import atomic
from foundation.infra.errors import UserError
from pretrain.corpus import corpus_files
from pretrain.corpus_source import CorpusSource, is_spec, path_provenance, summary
from pretrain.vocab import shared_dir
from tasks.registry import GLUE_TASKS, GlueTask

GLUE_SPEC = "glue:"
SPLIT = "train"
HUB = "hub:nyu-mll/glue"


def corpus_source(entries: tuple[str, ...], data_dir: str | None, cache_dir: str) -> CorpusSource | None:
    """The files and provenance of a corpus that names task text; None for files and folders only (the
    loop reads those itself, as before specs existed)."""
    if not any(is_spec(entry) for entry in entries):
        return None
    files: list[Path] = []
    sources: list[dict] = []
    for entry in entries:
        if is_spec(entry):
            file, provenance = glue_text(entry, data_dir, Path(cache_dir))
            found = [file]
        else:
            found = corpus_files([entry])
            provenance = path_provenance(entry, found)
        files += found
        sources.append(provenance)
    return CorpusSource(tuple(files), {"summary": summary(sources), "sources": sources})


def parse_spec(spec: str) -> list[GlueTask]:
    """The tasks of `glue:NAME,...`, in the order given; unknown names are one UserError."""
    names = list(dict.fromkeys(name.strip().lower() for name in spec.removeprefix(GLUE_SPEC).split(",")
                               if name.strip()))
    unknown = [name for name in names if name not in GLUE_TASKS]
    if not names or unknown:
        what = f"unknown GLUE task {unknown[0]!r}" if unknown else "no task"
        raise UserError(f"corpus {spec!r} names {what}; write glue:TASK,... with tasks from "
                        f"{', '.join(GLUE_TASKS)}")
    return [GLUE_TASKS[name] for name in names]


def glue_text(spec: str, data_dir: str | None, cache_dir: Path) -> tuple[Path, dict]:
    """(the text file, its provenance) of a `glue:` spec: one document per task, one paragraph per input."""
    tasks = parse_spec(spec)
    root = _data_root(data_dir)
    documents, counts = [], []
    for task in tasks:
        examples, source = _train_split(task, root, spec)
        sides = [examples[column] for column in ("text_a", "text_b") if column in examples.column_names]
        paragraphs = [" ".join(text.split()) for row in zip(*sides, strict=True) for text in row
                      if text.strip()]
        documents.append("\n".join(paragraphs))
        counts.append({"task": task.name, "file": source, "examples": len(examples),
                       "texts": len(paragraphs)})
    text = "\n\n".join(documents) + "\n"
    fingerprint = hashlib.sha256(text.encode()).hexdigest()[:16]
    file = cache_dir / "task-text" / f"glue-{'-'.join(t.name for t in tasks)}-{fingerprint}.txt"
    if not file.is_file():  # named by its content: an existing file holds this very text
        atomic.write_text(file, text)
    return file, {"kind": "glue", "spec": spec, "split": SPLIT, "data_dir": str(root) if root else HUB,
                  "tasks": counts, "fingerprint": fingerprint, "file": str(file.resolve())}


def _data_root(data_dir: str | None) -> Path | None:
    """--data-dir, else GLUE_DIR, else the shared folder's data/glue, else None (the Hugging Face Hub)."""
    from tasks.glue_data import glue_dir  # imports `datasets`: only for a corpus that names tasks

    chosen = glue_dir(data_dir)
    if chosen is None and (shared_dir() / "data" / "glue").is_dir():
        chosen = shared_dir() / "data" / "glue"
    return chosen


def _train_split(task: GlueTask, root: Path | None, spec: str):
    """The task's training examples (and the file read) from `root`, or from the Hub when it is None."""
    if SPLIT not in task.files:
        raise UserError(f"GLUE task {task.name!r} in corpus {spec!r} has no training split (only "
                        f"{', '.join(task.files)}); the corpus takes training text only: drop {task.name}")
    from tasks.glue_data import load_glue, read_tsv

    if root is None:
        return load_glue(task, None)[SPLIT], HUB
    path = root / task.dir_name / task.files[SPLIT]
    if not path.is_file():
        raise UserError(f"GLUE task {task.name!r} in corpus {spec!r} has no training file {str(path)!r} (the "
                        f"corpus takes training text only, never dev or test); add it or drop {task.name}")
    return read_tsv(task, path, labelled=True), str(path.resolve())
