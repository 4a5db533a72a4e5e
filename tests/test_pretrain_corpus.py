"""Corpus reading, ELECTRA-style packing, the Arrow caches and the resumable batch order."""

from __future__ import annotations

import gzip
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from foundation.infra.errors import UserError
from pretrain.corpus import corpus_files, iter_paragraphs, tokenized_paragraphs
from pretrain.data import BatchStream, collate
from pretrain.packing import ExampleBuilder, packed_examples
from pretrain.vocab import load_tokenizer, tokenizer_fingerprint

CLS, SEP = 2, 3


def test_corpus_files_reads_text_and_gzip_and_skips_the_rest(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt") as handle:
        handle.write("two\n")
    (tmp_path / "books.tsv").write_text("x\ty\n")
    (tmp_path / "MANIFEST.md").write_text("# not text\n")
    assert [p.name for p in corpus_files([str(tmp_path)])] == ["a.txt", "b.txt.gz"]
    with pytest.raises(UserError, match="does not exist"):
        corpus_files([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no text files"):
        corpus_files([str(tmp_path / "empty")])


def test_blank_lines_and_files_end_documents(tmp_path):
    (tmp_path / "a.txt").write_text("p1\np2\n\n  \np3\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt") as handle:
        handle.write("p4\n")
    paragraphs = list(iter_paragraphs([tmp_path / "a.txt", tmp_path / "b.txt.gz"]))
    assert paragraphs == [("p1", True), ("p2", False), ("p3", True), ("p4", True)]


def build(documents, max_length=32, seed=0):
    builder = ExampleBuilder(max_length, CLS, SEP, random.Random(seed))
    examples = []
    for doc in documents:
        for i, paragraph in enumerate(doc):
            examples += builder.add(list(paragraph), starts_document=i == 0)
    return examples + list(builder.flush())


def test_packing_keeps_every_token_in_order_within_documents():
    rng = random.Random(1)
    # Token ids encode (document, position) so order and document purity can be checked.
    documents = [[[100 + 1000 * d + 10 * p + t for t in range(rng.randint(1, 40))]
                  for p in range(rng.randint(1, 8))] for d in range(60)]
    examples = build(documents)
    content = [[t for t in ex["input_ids"] if t not in (CLS, SEP)] for ex in examples]
    assert [t for c in content for t in c] == [t for doc in documents for p in doc for t in p]
    assert all({(t - 100) // 1000 for t in c} == {(c[0] - 100) // 1000} for c in content)  # one document
    assert all(len(ex["input_ids"]) <= 32 for ex in examples)
    for ex in examples:
        ids, b = ex["input_ids"], ex["segment_b_start"]
        assert ids[0] == CLS and ids[b - 1] == SEP and ids[-1] == SEP


def test_packing_mix_of_two_segment_single_segment_and_short_examples():
    rng = random.Random(2)
    documents = [[list(range(100, 100 + rng.randint(5, 30))) for _ in range(1000)] for _ in range(4)]
    examples = build(documents, max_length=128, seed=3)
    full = [ex for ex in examples if len(ex["input_ids"]) >= 127]  # one segment: one [SEP] fewer
    two_segment = [ex for ex in examples if ex["segment_b_start"] < len(ex["input_ids"])]
    assert len(examples) > 500
    assert 0.88 < len(full) / len(examples) < 0.99  # ~5% random-length targets, 4 document ends
    assert 0.85 < len(two_segment) / len(examples) < 0.95  # ~90% two segments


def write_word_corpus(path, documents=40, seed=0):
    """Sentences of 5 to 40 words drawn from 16 (not conftest.write_corpus's subject-verb-object text)."""
    rng = random.Random(seed)
    words = "the cat dog bird sat ran saw big small red old man woman door river garden".split()
    with open(path, "w") as handle:
        for _ in range(documents):
            for _ in range(rng.randint(2, 6)):
                handle.write(" ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + ".\n")
            handle.write("\n")
    return path


def test_arrow_caches_are_reused_and_keyed_by_length(tmp_path):
    files = [write_word_corpus(tmp_path / "c.txt")]
    tokenizer = load_tokenizer("train", files, tmp_path / "cache", 100)
    tokenizer_dir = tmp_path / "tok"
    tokenizer.save_pretrained(tokenizer_dir)
    key = tokenizer_fingerprint(tokenizer)
    paragraphs = tokenized_paragraphs(files, tokenizer_dir, key, tmp_path / "cache")
    assert sum(paragraphs["starts_document"]) == 40
    again = tokenized_paragraphs(files, tokenizer_dir, key, tmp_path / "cache")
    assert again.cache_files == paragraphs.cache_files
    ids = tokenizer.cls_token_id, tokenizer.sep_token_id
    short = packed_examples(paragraphs, 16, 0, *ids, tmp_path / "cache")
    long = packed_examples(paragraphs, 64, 0, *ids, tmp_path / "cache")
    assert max(len(x) for x in short["input_ids"]) == 16 and max(len(x) for x in long["input_ids"]) == 64
    assert short.cache_files != long.cache_files
    tokens = sum(len(x) for x in paragraphs["input_ids"])
    assert sum(len(x) - 2 for x in long["input_ids"]) >= tokens  # nothing dropped ([CLS] + a [SEP] or two)


def test_collate_pads_and_sets_token_types():
    batch = collate(np.array([CLS, 7, SEP, 8, 9, SEP, CLS, 7, SEP]), np.array([6, 3]), np.array([3, 3]), width=7,
                    pad_id=0)
    assert batch["input_ids"].tolist() == [[CLS, 7, SEP, 8, 9, SEP, 0], [CLS, 7, SEP, 0, 0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0]]


def fake_examples(n):
    import datasets

    return datasets.Dataset.from_dict({"input_ids": [[CLS, 10 + i, SEP] for i in range(n)],
                                       "segment_b_start": [3] * n})


def test_batch_order_resumes_exactly_across_epochs():
    examples = fake_examples(10)
    stream = BatchStream(examples, batch_size=4, seed=0, pad_id=0)
    first = [stream.next_batch()[0]["input_ids"][:, 1].tolist() for _ in range(2)]
    state = stream.state_dict()
    rest = [stream.next_batch()[0]["input_ids"][:, 1].tolist() for _ in range(4)]
    resumed = BatchStream(examples, batch_size=4, seed=0, pad_id=0)
    resumed.load_state_dict(state)
    assert [resumed.next_batch()[0]["input_ids"][:, 1].tolist() for _ in range(4)] == rest
    epoch0 = sorted(t for batch in first for t in batch) + sorted(rest[0][:2])
    assert sorted(epoch0) == list(range(10, 20))  # every example once per epoch


def test_processes_share_a_global_batch_without_overlap():
    examples = fake_examples(12)
    whole, tokens = BatchStream(examples, batch_size=4, seed=1, pad_id=0).next_batch()
    parts = [BatchStream(examples, batch_size=4, seed=1, pad_id=0, rank=r, world_size=2).next_batch()
             for r in range(2)]
    assert torch.equal(torch.cat([p[0]["input_ids"] for p in parts]), whole["input_ids"])
    assert parts[0][1] == parts[1][1] == tokens == 12


def test_an_installed_copy_finds_the_shared_data_from_the_working_directory(tmp_path, monkeypatch):
    """`.tox/demo/bin/harness` runs pretrain/vocab.py from site-packages: no checkout beside it."""
    import importlib.util

    from pretrain import vocab

    installed = tmp_path / "env" / "lib" / "site-packages" / "pretrain"
    installed.mkdir(parents=True)
    shutil.copy(vocab.__file__, installed / "vocab.py")
    spec = importlib.util.spec_from_file_location("installed_vocab", installed / "vocab.py")
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "checkout" / "runs").mkdir(parents=True)
    monkeypatch.delenv("SHARED_DIR", raising=False)
    monkeypatch.chdir(tmp_path / "checkout" / "runs")
    assert copy.shared_dir() == tmp_path / "shared"
    assert vocab.shared_dir() == Path(vocab.__file__).resolve().parents[2] / "shared"  # from a checkout


def test_batches_hold_each_examples_tokens_from_the_rows_arrow_gives():
    """The stream reads a batch's rows as Arrow arrays (flat token ids and lengths), not Python lists: each
    row of the batch is its example's tokens then padding, token types from its segment_b_start, for a
    dataset seen through an indices mapping (shuffle, select) and a share per process."""
    import datasets

    rows = [[CLS, *range(10, 10 + n), SEP] for n in range(1, 14)]
    examples = datasets.Dataset.from_dict({"input_ids": rows, "segment_b_start": [1 + n % 5 for n in range(13)]})
    examples = examples.shuffle(seed=4).select(range(11))
    for width, rank, world in ((None, 0, 1), (16, 1, 2)):
        order = BatchStream(examples, batch_size=4, seed=2, pad_id=0)
        stream = BatchStream(examples, batch_size=4, seed=2, pad_id=0, rank=rank, world_size=world, width=width)
        for _ in range(5):  # past the epoch's end
            taken = [examples[i] for i in order._take(4)]
            batch, tokens = stream.next_batch()
            assert tokens == sum(len(t["input_ids"]) for t in taken)
            share = taken[rank * 4 // world:(rank + 1) * 4 // world]
            wide = width or max(len(t["input_ids"]) for t in taken)
            assert batch["input_ids"].tolist() == [t["input_ids"] + [0] * (wide - len(t["input_ids"])) for t in share]
            assert batch["token_type_ids"].tolist() == [
                [int(t["segment_b_start"] <= i < len(t["input_ids"])) for i in range(wide)] for t in share]
            assert batch["attention_mask"].sum(1).tolist() == [len(t["input_ids"]) for t in share]


def test_an_example_longer_than_the_width_is_refused():
    with pytest.raises(ValueError, match="longer than the width 3"):
        collate(np.array([CLS, 7, 8, SEP]), np.array([4]), np.array([2]), width=3, pad_id=0)
