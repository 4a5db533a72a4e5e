"""`--corpus glue:sst2,stsb,rte`: the named GLUE tasks' training inputs as pre-training text.

A spec `KIND:...` names a kind of task (harness/kinds.py) whose description reads its tasks' training
inputs (GLUE: `corpus_inputs`, through the fine-tuning loaders of tasks/glue_data.py), never dev or
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
from harness import kinds
from pretrain.corpus import corpus_files
from pretrain.corpus_source import CorpusSource, is_spec, path_provenance, summary
from pretrain.vocab import shared_dir

SPLIT = "train"


def corpus_source(entries: tuple[str, ...], data_dir: str | None, cache_dir: str) -> CorpusSource | None:
    """The files and provenance of a corpus that names task text; None for files and folders only (the
    loop reads those itself, as before specs existed)."""
    if not any(is_spec(entry) for entry in entries):
        return None
    files: list[Path] = []
    sources: list[dict] = []
    for entry in entries:
        if is_spec(entry):
            file, provenance = task_text(entry, data_dir, Path(cache_dir))
            found = [file]
        else:
            found = corpus_files([entry])
            provenance = path_provenance(entry, found)
        files += found
        sources.append(provenance)
    return CorpusSource(tuple(files), {"summary": summary(sources), "sources": sources})


def task_text(spec: str, data_dir: str | None, cache_dir: Path) -> tuple[Path, dict]:
    """(the text file, its provenance) of a spec: one document per task, one paragraph per input. The
    kind reads from --data-dir, else its own default, else the shared folder's data/KIND, else the Hub."""
    kind = kinds.kind(spec.partition(":")[0])
    read = kinds.load(kind.description).corpus_inputs(spec, data_dir, shared_dir() / "data" / kind.name)
    documents, counts = [], []
    for task in read.tasks:
        paragraphs = [" ".join(text.split()) for row in task.inputs for text in row if text.strip()]
        documents.append("\n".join(paragraphs))
        counts.append({"task": task.task, "file": task.file, "examples": len(task.inputs),
                       "texts": len(paragraphs)})
    text = "\n\n".join(documents) + "\n"
    fingerprint = hashlib.sha256(text.encode()).hexdigest()[:16]
    file = cache_dir / "task-text" / f"{kind.name}-{'-'.join(t.task for t in read.tasks)}-{fingerprint}.txt"
    if not file.is_file():  # named by its content: an existing file holds this very text
        atomic.write_text(file, text)
    return file, {"kind": kind.name, "spec": spec, "split": SPLIT, "data_dir": read.data_dir,
                  "tasks": counts, "fingerprint": fingerprint, "file": str(file.resolve())}
