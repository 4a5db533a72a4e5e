"""`--corpus glue:TASK,...`: the tasks' training inputs only, packed into whole sequences, with provenance."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from foundation.infra.errors import UserError
from foundation.models.identity import identify
from harness.cli import main
from harness.pretraining.task_corpus import corpus_source
from pretrain.corpus import iter_paragraphs, tokenized_paragraphs
from pretrain.corpus_source import from_paths
from pretrain.packing import packed_examples
from reports import accounting, render
from reports.leaderboard import measured_row
from tests.conftest import write_glue_dir
from tests.pretrain_helpers import pretrain_args

# (folder, file, text columns) as the GLUE download lays them out: what the corpus must hold, read here
# with csv rather than the loaders the corpus uses.
LAYOUT = {"sst2": ("SST-2", ("sentence",)), "rte": ("RTE", ("sentence1", "sentence2")),
          "stsb": ("STS-B", ("sentence1", "sentence2"))}


def write_sst2(root: Path) -> None:
    """SST-2 whose every sentence names its split, so a dev or test sentence in the corpus is plain to see."""
    folder = root / "SST-2"
    folder.mkdir(parents=True)
    words = ("good", "bad", "very good", "not bad", "sad")
    for split, n in (("train", 40), ("dev", 6), ("test", 6)):
        header = "index\tsentence" if split == "test" else "sentence\tlabel"
        rows = [f"{i}\t{split} film {i} was {words[i % 5]} ." if split == "test"
                else f"{split} film {i} was {words[i % 5]} .\t{i % 2}" for i in range(n)]
        (folder / f"{split}.tsv").write_text("\n".join([header, *rows]) + "\n")


@pytest.fixture
def glue(tmp_path) -> Path:
    root = write_glue_dir(tmp_path / "glue", n_train=12, n_dev=8)  # RTE, STS-B, CoLA
    write_sst2(root)
    (root / "QNLI").mkdir()  # as the shared data: dev and test, no train.tsv
    (root / "QNLI" / "dev.tsv").write_text("index\tquestion\tsentence\tlabel\n0\twho ?\tshe .\tentailment\n")
    return root


def texts(root: Path, task: str, split: str) -> list[str]:
    folder, columns = LAYOUT[task]
    with (root / folder / f"{split}.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row[column] for row in rows for column in columns]


def test_the_corpus_holds_every_training_input_and_no_dev_or_test_text(glue, tmp_path):
    source = corpus_source(("glue:sst2,rte,stsb",), str(glue), str(tmp_path / "cache"))
    paragraphs = list(iter_paragraphs(list(source.files)))
    train = [text for task in ("sst2", "rte", "stsb") for text in texts(glue, task, "train")]
    # Every training input once, in order, one paragraph each; each task its own document.
    assert [text for text, _ in paragraphs] == train
    assert [starts for _, starts in paragraphs].count(True) == 3
    assert [i for i, (_, starts) in enumerate(paragraphs) if starts] == [0, 40, 40 + 24]
    held_out = {text for task in ("sst2",) for split in ("dev", "test") for text in texts(glue, task, split)}
    assert held_out and not held_out & {text for text, _ in paragraphs}
    assert all(t.startswith("train film ") for t, _ in paragraphs[:40])
    # RTE and STS-B's fixtures repeat sentences across splits; no dev or test row adds a paragraph.
    assert Counter(t for t, _ in paragraphs[40:]) == Counter(texts(glue, "rte", "train")
                                                              + texts(glue, "stsb", "train"))
    (entry,) = source.provenance["sources"]
    file = source.files[0]
    assert entry == {"kind": "glue", "spec": "glue:sst2,rte,stsb", "split": "train", "data_dir": str(glue),
                     "tasks": [{"task": "sst2", "file": str((glue / "SST-2/train.tsv").resolve()),
                                "examples": 40, "texts": 40},
                               {"task": "rte", "file": str((glue / "RTE/train.tsv").resolve()),
                                "examples": 12, "texts": 24},
                               {"task": "stsb", "file": str((glue / "STS-B/train.tsv").resolve()),
                                "examples": 12, "texts": 24}],
                     "fingerprint": hashlib.sha256(file.read_bytes()).hexdigest()[:16], "file": str(file.resolve())}
    assert source.provenance["summary"] == (f"glue:sst2,rte,stsb train text (sst2 40 + rte 12 + stsb 12 "
                                            f"examples; sha256 {entry['fingerprint']})")


def test_the_file_is_reused_and_glue_dir_is_the_default(glue, tmp_path, monkeypatch):
    monkeypatch.setenv("GLUE_DIR", str(glue))
    first = corpus_source(("glue:rte",), None, str(tmp_path / "cache"))
    mtime = first.files[0].stat().st_mtime_ns
    again = corpus_source(("glue:rte",), None, str(tmp_path / "cache"))
    assert again.files == first.files and first.files[0].stat().st_mtime_ns == mtime  # not rewritten
    (glue / "RTE" / "train.tsv").write_text((glue / "RTE" / "train.tsv").read_text().replace("cat", "bird"))
    changed = corpus_source(("glue:rte",), None, str(tmp_path / "cache"))
    assert changed.files != first.files  # other data, another file: the tokenised caches follow it


def test_files_and_folders_beside_a_spec_keep_working(glue, tmp_path):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_text("one book .\n")
    source = corpus_source((str(tmp_path / "books"), "glue:rte"), str(glue), str(tmp_path / "cache"))
    assert source.files[0] == tmp_path / "books" / "a.txt" and len(source.files) == 2
    assert source.provenance["sources"][0] == {"kind": "files", "path": str((tmp_path / "books").resolve()),
                                               "files": 1}
    assert source.provenance["summary"].startswith("books (1 file); glue:rte train text (rte 12 examples;")
    assert corpus_source((str(tmp_path / "books"),), str(glue), str(tmp_path / "cache")) is None


def test_a_corpus_of_folders_records_its_files_and_refuses_a_spec_outside_the_cli(tmp_path):
    (tmp_path / "books" / "more").mkdir(parents=True)
    (tmp_path / "books" / "a.txt").write_text("one book .\n")
    (tmp_path / "books" / "more" / "b.txt.gz").write_bytes(gzip.compress(b"two books .\n"))
    (tmp_path / "c.txt").write_text("a third .\n")
    source = from_paths((str(tmp_path / "books"), str(tmp_path / "c.txt")))
    assert source.provenance == {"summary": "books (2 files); c.txt (1 file)", "sources": [
        {"kind": "files", "path": str(tmp_path / "books"), "files": 2},
        {"kind": "files", "path": str(tmp_path / "c.txt"), "files": 1}]}
    with pytest.raises(UserError, match="corpus 'glue:rte' names task text, which `harness pretrain` reads"):
        from_paths(("glue:rte",))


def test_packing_fills_whole_sequences_from_short_texts(glue, tmp_path, tiny_model):
    source = corpus_source(("glue:sst2,rte",), str(glue), str(tmp_path / "cache"))
    paragraphs = tokenized_paragraphs(list(source.files), tiny_model, "tiny", tmp_path / "cache")
    tokens = sum(len(ids) for ids in paragraphs["input_ids"])
    assert len(paragraphs) == 40 + 24 and tokens / len(paragraphs) < 8  # short texts: ~6 tokens each
    examples = packed_examples(paragraphs, 32, 0, 2, 3, tmp_path / "cache")
    lengths = [len(ids) for ids in examples["input_ids"]]
    # Every token packed ([CLS] and one [SEP] a segment), into far fewer sequences than texts: all full
    # (29 text tokens and 3 specials, or 31 and 2 in a one-segment example) but each document's last
    # and any random-length ones (5%).
    specials = sum(2 if b == n else 3 for b, n in zip(examples["segment_b_start"], lengths, strict=True))
    assert sum(lengths) - specials == tokens
    assert len(examples) <= tokens // 29 + 2 + 2
    assert sum(n >= 31 for n in lengths) >= len(examples) - 4
    assert sum(lengths) / (32 * len(examples)) > 0.85  # one text a sequence would fill a quarter


@pytest.mark.parametrize("spec,message", [
    ("glue:sst2,qnli", "GLUE task 'qnli' in corpus 'glue:sst2,qnli' has no training file '{glue}/QNLI/train.tsv' "
                       "(the corpus takes training text only, never dev or test); add it or drop qnli"),
    ("glue:ax", "GLUE task 'ax' in corpus 'glue:ax' has no training split (only test); the corpus takes "
                "training text only: drop ax"),
    ("glue:sst", "corpus 'glue:sst' names unknown GLUE task 'sst'; write glue:TASK,... with tasks from cola, "
                 "sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, ax"),
])
def test_a_task_without_training_text_is_refused_in_one_line(glue, tmp_path, micro, capsys, spec,
                                                              message):
    code = main(pretrain_args(tmp_path, spec, "--data-dir", str(glue), "max_steps=1"))
    err = capsys.readouterr().err
    assert code == 2 and err == f"harness: error: {message.format(glue=glue)}\n"
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()
    with pytest.raises(UserError):
        corpus_source((spec,), str(glue), str(tmp_path / "cache"))


@pytest.mark.slow
def test_pretrain_on_the_tasks_text_end_to_end(glue, tmp_path, micro, capsys):
    args = pretrain_args(tmp_path, "glue:sst2,rte", "--data-dir", str(glue), "max_steps=3")
    assert main(args) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    meta = json.loads((out / "pretrain_meta.json").read_text())
    assert meta["steps"] == 3 and meta["config"]["corpus"] == ["glue:sst2,rte"]  # the spec, as written
    (entry,) = meta["corpus"]["sources"]
    assert (entry["split"], [(t["task"], t["examples"]) for t in entry["tasks"]]) == ("train", [("sst2", 40),
                                                                                              ("rte", 12)])
    assert entry["fingerprint"] == hashlib.sha256(Path(entry["file"]).read_bytes()).hexdigest()[:16]
    # The corpus spec is a setting: the same spec resumes (here: already done), another is refused.
    assert main(args) == 0
    capsys.readouterr()
    assert main(pretrain_args(tmp_path, "glue:sst2", "--data-dir", str(glue), "max_steps=3")) == 2
    assert "corpus: ['glue:sst2,rte'] -> ('glue:sst2',)" in capsys.readouterr().err
    # ... and on the leaderboard row of a model fine-tuned from it.
    config = json.loads((out / "discriminator" / "config.json").read_text())
    costs = accounting.run_flops(identify(str(out), str(out / "discriminator"), config), [])
    assert costs["pretrain_corpus"] == meta["corpus"]["summary"]
    (tmp_path / "results.json").write_text(json.dumps(
        {"format": "electra-harness/glue-results/1", "model": {"name": str(out), "path": str(out / "discriminator")},
         "summary": {}, "flops": costs}))
    row = measured_row(tmp_path / "results.json", json.loads((tmp_path / "results.json").read_text()))
    assert row.corpus == meta["corpus"]["summary"]
    assert f"| pre-training corpus | {meta['corpus']['summary']} |" in render.details(row)
