"""Every kind's runner, reached through the registry: its data checked without a model, and a Job's
progress passed to the fine-tuning loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundation.infra.errors import UserError
from harness import kinds
from harness.finetuning.kind_runner import Job
from tests.conftest import write_glue_dir, write_squad

CONLL = "the B-NP\ncat I-NP\nsat B-VP\n\na B-NP\ndog I-NP\n"


def _described(kind: str, tmp_path: Path) -> tuple[dict, Path]:
    """Good data of the kind, written under tmp_path: its description's keys, and a file to damage."""
    if kind == "glue":
        root = write_glue_dir(tmp_path / "glue", n_train=6, n_dev=4)
        return {"tasks": "rte,stsb", "data_dir": str(root)}, root / "STS-B" / "dev.tsv"
    if kind == "squad":
        dev = write_squad(tmp_path / "dev.json", "1.1")
        return {"train_file": str(write_squad(tmp_path / "train.json", "1.1", seed=1)), "dev_file": str(dev)}, dev
    if kind == "text":
        (tmp_path / "train.csv").write_text("sentence,label\ngood film,pos\nbad film,neg\nfine film,pos\n")
        (tmp_path / "dev.csv").write_text("sentence,label\nnice film,pos\ndull film,neg\n")
        return {"train": str(tmp_path / "train.csv"), "dev": str(tmp_path / "dev.csv"),
                "text": ("sentence",)}, tmp_path / "dev.csv"
    (tmp_path / "train.txt").write_text(CONLL)
    (tmp_path / "dev.txt").write_text(CONLL)
    return {"train": str(tmp_path / "train.txt"), "dev": str(tmp_path / "dev.txt")}, tmp_path / "dev.txt"


def _job(kind: str, described: dict, **fields) -> Job:
    found = kinds.kind(kind)
    settings = tuple(cls() for cls in kinds.settings_classes(found))
    return Job(model="no-such-model", description=kinds.load(found.description)(**described), settings=settings,
               **fields)


# What each kind's check says of the damaged file (see _damage).
DAMAGED = {"glue": r"dev.tsv:2: expected 10 tab-separated fields, found 1",
           "squad": r"dev.json has no top-level 'data' list", "text": r"dev.csv: no column 'label'",
           "tagging": r"dev.txt: no sentences in the validation file"}


def _damage(kind: str, path: Path) -> None:
    if kind == "glue":  # a line without its tabs, right after the header
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], "no tabs here", *lines[1:]]) + "\n")
    elif kind == "squad":
        path.write_text(json.dumps({"version": "1.1"}))  # no "data"
    elif kind == "text":
        path.write_text("sentence\nnice film\n")  # no label column
    else:
        path.write_text("")  # no sentences


@pytest.mark.parametrize("kind", list(kinds.KINDS))
def test_every_kind_checks_its_data_without_a_model(kind, tmp_path):
    runner = kinds.load(kinds.kind(kind).runner)
    described, damaged = _described(kind, tmp_path)
    job = _job(kind, described)
    assert runner.check_data(job) is None  # good data; the model, which does not exist, is never read
    _damage(kind, damaged)
    with pytest.raises(UserError, match=DAMAGED[kind]):
        runner.check_data(job)


@pytest.mark.parametrize("kind", list(kinds.KINDS))
@pytest.mark.parametrize("progress", [None, False, True])
def test_a_jobs_progress_reaches_the_fine_tuning_loop(kind, progress, tmp_path, monkeypatch):
    found = kinds.kind(kind)
    runner = kinds.load(found.runner)
    module = __import__(found.runner.partition(":")[0], fromlist=["run_finetuning"])
    seen = []
    monkeypatch.setattr(module, "run_finetuning", lambda invocation, benchmark, given: seen.append(given) or {})
    runner.run(_job(kind, _described(kind, tmp_path)[0], progress=progress))
    assert seen == [progress]
