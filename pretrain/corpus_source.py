"""What a run trains on: the text files behind its `corpus` setting, and their provenance.

A corpus entry is a text file or folder, or a spec naming other text, such as `glue:sst2,stsb,rte`
(the named GLUE tasks' training inputs). Folders and files are read here; a spec is turned into a
text file by `harness pretrain` (harness/pretraining/task_corpus.py), which can read the tasks'
data, and handed to the loop as a `CorpusSource`. The setting keeps the entry as written, so a
resumed run is checked against the spec, not against a cache path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from foundation.infra.errors import UserError
from pretrain.corpus import corpus_files

# Prefixes of corpus specs: entries that name text rather than being a path.
SPEC_PREFIXES = ("glue:",)


@dataclass(frozen=True)
class CorpusSource:
    """The files a run tokenises, and what pretrain_meta.json records about them under `corpus`."""

    files: tuple[Path, ...]
    # {"summary": one line for the leaderboard, "sources": one dict per corpus entry}
    provenance: dict = field(default_factory=dict)


def is_spec(entry: str) -> bool:
    return entry.startswith(SPEC_PREFIXES)


def path_provenance(entry: str, files: list[Path]) -> dict:
    """A file or folder entry as pretrain_meta.json records it; `files` is the whole corpus's."""
    path = Path(entry).expanduser()
    count = sum(1 for file in files if file == path or path in file.parents)
    return {"kind": "files", "path": str(path.resolve()), "files": count}


def from_paths(entries: tuple[str, ...] | list[str]) -> CorpusSource:
    """The source of a corpus of files and folders only; a spec is a UserError (only the CLI reads one)."""
    specs = [entry for entry in entries if is_spec(entry)]
    if specs:
        raise UserError(f"corpus {specs[0]!r} names task text, which `harness pretrain` reads; run it "
                        "through `harness pretrain --corpus ...` (or pass text files or folders)")
    files = corpus_files(entries)
    sources = [path_provenance(entry, files) for entry in entries]
    return CorpusSource(tuple(files), {"summary": summary(sources), "sources": sources})


def summary(sources: list[dict]) -> str:
    """One line naming each entry: a folder and its file count, or a spec and its example counts."""
    parts = []
    for source in sources:
        if source["kind"] == "files":
            count = source["files"]
            parts.append(f"{Path(source['path']).name} ({count} file{'s' if count != 1 else ''})")
        else:
            counts = " + ".join(f"{t['task']} {t['examples']:,}" for t in source["tasks"])
            parts.append(f"{source['spec']} {source['split']} text ({counts} examples; "
                         f"sha256 {source['fingerprint']})")
    return "; ".join(parts)
