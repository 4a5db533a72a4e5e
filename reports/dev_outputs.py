"""Per-seed dev outputs: what intervals and paired comparisons resample, one file per (task, seed).

`OUTPUT/predictions/TASK-seedN/dev_outputs.json` holds, per dev split, the example ids, and either
the raw predictions (class ids, or unclipped STS-B scores, as the metric saw them) with the gold
labels (GLUE), or each question's exact/F1 score against its gold answers (SQuAD; the official
EM/F1 are their means). Two fingerprints make a run directory self-contained for pairing:
`dev_set` (ids and gold labels: the same examples) and `tokenization` (the model inputs: the same
tokenizer and max_length).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from foundation.infra.errors import UserError

FORMAT = "electra-harness/dev-outputs/1"
FILE = "dev_outputs.json"


def fingerprint(*parts) -> str:
    """A short sha256 of JSON-serialisable parts."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def token_fingerprint(rows: Iterable[Sequence[int]]) -> str:
    """sha256 of tokenised inputs (input_ids rows), streamed: MNLI's 10k rows in well under a second."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(np.asarray(row, dtype=np.int64).tobytes() + b"|")
    return digest.hexdigest()[:16]


def glue_split(ids: Sequence, references: Sequence, predictions: Sequence, tokenization: str) -> dict:
    """One GLUE dev split's block."""
    references = [float(r) if isinstance(r, float) else int(r) for r in references]
    return {"ids": list(ids), "references": references, "predictions": [_number(p) for p in predictions],
            "dev_set": fingerprint(list(ids), references), "tokenization": tokenization}


def text_split(ids: Sequence, references: Sequence, predictions: Sequence, tokenization: str,
               metrics: Sequence[str], headline: str) -> dict:
    """One dev split of your own task (tasks/text.py): GLUE's block plus the metrics it is scored by and
    its headline, so intervals and compare need no registry row. Multi-label rows are 0/1 lists."""
    def plain(value):
        if isinstance(value, Sequence | np.ndarray):
            return [int(v) for v in value]
        return _number(value)

    references = [plain(r) for r in references]
    return {"ids": list(ids), "references": references, "predictions": [plain(p) for p in predictions],
            "dev_set": fingerprint(list(ids), references), "tokenization": tokenization,
            "metrics": list(metrics), "headline": headline}


def tagging_split(ids: Sequence, rows: np.ndarray, types: Sequence[str], gold: Sequence, tokenization: str,
                  metrics: Sequence[str], headline: str) -> dict:
    """One dev split of a tagging task (tasks/tagging.py): per sentence, conlleval's counts
    (tagging_metrics.flat_rows: each type's correct, guessed and gold chunks, then correct and total tags),
    whose sums over a resample of sentences give its F1."""
    return {"ids": list(ids), "counts": np.asarray(rows).astype(int).tolist(), "types": list(types),
            "dev_set": fingerprint(list(ids), [list(tags) for tags in gold]), "tokenization": tokenization,
            "metrics": list(metrics), "headline": headline}


def squad_split(ids: Sequence[str], scores: Mapping[str, Sequence[float]], gold: Sequence,
                tokenization: str) -> dict:
    """One SQuAD dev split's block: per-question scores (percent) for each metric that is their mean."""
    return {"ids": list(ids), "scores": {name: [float(v) for v in values] for name, values in scores.items()},
            "dev_set": fingerprint(list(ids), list(gold)), "tokenization": tokenization}


def record(task: str, seed: int, splits: Mapping[str, dict]) -> dict:
    return {"format": FORMAT, "task": task, "seed": seed, "splits": dict(splits)}


def _number(value) -> float | int:
    value = value.item() if hasattr(value, "item") else value
    return int(value) if isinstance(value, int | np.integer) else float(value)


@dataclass(frozen=True)
class SplitOutputs:
    """One dev split of one task over a run's seeds: rows are seeds, columns dev examples."""

    ids: list
    dev_set: str
    tokenization: str
    seeds: tuple[int, ...]
    predictions: np.ndarray | None = None  # (seeds, n), GLUE
    references: np.ndarray | None = None  # (n,), GLUE
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # metric -> (seeds, n), SQuAD
    metrics: tuple[str, ...] = ()  # your own task's metrics (text_split); GLUE's come from the registry
    headline: str | None = None  # your own task's `score`
    counts: np.ndarray | None = None  # (seeds, n, columns), tagging: conlleval's counts per sentence
    types: tuple[str, ...] = ()  # tagging: the chunk types of `counts`

    @property
    def num_examples(self) -> int:
        return len(self.ids)


def path_of(run_dir: Path, task: str, seed: int) -> Path:
    return run_dir / "predictions" / f"{task}-seed{seed}" / FILE


def load_task(run_dir: Path, task: str, seeds: Sequence[int]) -> dict[str, SplitOutputs] | None:
    """A task's dev outputs over seeds, by split; None when any seed's file is missing (an older run)."""
    files = [path_of(run_dir, task, seed) for seed in seeds]
    if not seeds or not all(f.is_file() for f in files):
        return None
    blocks = []
    for path in files:
        try:
            loaded = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise UserError(f"{path} is unreadable ({type(error).__name__}); re-run the task to rewrite it") \
                from error
        if loaded.get("format") != FORMAT:
            raise UserError(f"{path} has format {loaded.get('format')!r}, not {FORMAT}; re-run the task")
        blocks.append(loaded["splits"])
    return {split: _stack(run_dir, task, tuple(seeds), [b[split] for b in blocks]) for split in blocks[0]}


def _stack(run_dir: Path, task: str, seeds: tuple[int, ...], blocks: list[dict]) -> SplitOutputs:
    first = blocks[0]
    if any(b["dev_set"] != first["dev_set"] for b in blocks):
        raise UserError(f"{run_dir}: the seeds of {task} were scored on different dev examples; "
                        "re-run it in a fresh --output-dir")
    if "predictions" in first:
        return SplitOutputs(first["ids"], first["dev_set"], first["tokenization"], seeds,
                            predictions=np.array([b["predictions"] for b in blocks]),
                            references=np.array(first["references"]),
                            metrics=tuple(first.get("metrics", ())), headline=first.get("headline"))
    if "counts" in first:
        return SplitOutputs(first["ids"], first["dev_set"], first["tokenization"], seeds,
                            counts=np.array([b["counts"] for b in blocks], dtype=np.int64),
                            types=tuple(first["types"]), metrics=tuple(first["metrics"]),
                            headline=first["headline"])
    scores = {name: np.array([b["scores"][name] for b in blocks], dtype=float) for name in first["scores"]}
    return SplitOutputs(first["ids"], first["dev_set"], first["tokenization"], seeds, scores=scores)
