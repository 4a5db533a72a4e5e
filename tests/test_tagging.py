"""Tagging (`harness run tagging`): conlleval's figures worked by hand, CoNLL and JSON Lines files read
and refused, and the task run end to end on a tiny model with data the tests make."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from foundation.infra.errors import UserError
from foundation.models.identity import identify

# ---- conlleval ------------------------------------------------------------------------------------

# A worked fixture; conlleval's answer by hand. Gold chunks: S1 NP(0,1) VP(3,4) PP(6); S2 NP(1,2); S3 NP(0)
# VP(1) (I- after another type starts a chunk); S4 NP(0) NP(1). Guessed: S1 NP(0,1) VP(3) NP(6); S2 NP(1,2)
# (I- after O starts a chunk); S3 NP(0,1); S4 NP(0,1). Correct: S1 NP(0,1), S2 NP(1,2): 2 of 6 guessed, 2 of 8
# gold: precision 33.33, recall 25.00, FB1 28.57; tags 5 + 2 + 1 + 0 = 8 of 7 + 3 + 2 + 2 = 14 equal: accuracy
# 57.14.
# NP: 2 correct of 5 guessed and 5 gold (FB1 40.00); VP 0 of 1 and 2; PP 0 of 0 and 1.
GOLD = [["B-NP", "I-NP", "O", "B-VP", "I-VP", "O", "B-PP"], ["O", "B-NP", "I-NP"], ["I-NP", "I-VP"],
        ["B-NP", "B-NP"]]
GUESS = [["B-NP", "I-NP", "O", "B-VP", "O", "O", "B-NP"], ["O", "I-NP", "I-NP"], ["I-NP", "I-NP"],
         ["I-NP", "I-NP"]]


def test_conlleval_on_a_worked_fixture():
    from tasks.tagging_metrics import conlleval

    found = conlleval(GOLD, GUESS)
    assert found["precision"] == pytest.approx(2 / 6)
    assert found["recall"] == pytest.approx(2 / 8)
    assert found["f1"] == pytest.approx(2 / 7)  # conlleval: FB1 28.57
    assert found["accuracy"] == pytest.approx(8 / 14)
    assert found["f1_NP"] == pytest.approx(0.4)
    assert found["f1_VP"] == 0.0 and found["f1_PP"] == 0.0


def test_chunks_read_as_conlleval_reads_them():
    from tasks.tagging_metrics import chunks

    assert chunks(["O", "I-NP", "I-NP"]) == [("NP", 1, 2)]  # I- after O starts a chunk
    assert chunks(["I-NP", "B-NP", "I-NP"]) == [("NP", 0, 0), ("NP", 1, 2)]  # IOB1
    assert chunks(["B-NP", "I-VP"]) == [("NP", 0, 0), ("VP", 1, 1)]  # a change of type
    assert chunks(["B-NP", "E-NP", "S-NP", "S-VP", "B-PP", "I-PP", "E-PP"]) == [
        ("NP", 0, 1), ("NP", 2, 2), ("VP", 3, 3), ("PP", 4, 6)]
    assert chunks(["B-I-PER", "I-I-PER"]) == [("I-PER", 0, 1)]  # the type is all after the first '-'


@pytest.mark.parametrize("scheme, expected", [
    ("IOB2", ["B-NP", "I-NP", "B-NP", "O", "B-VP"]),
    ("IOB1", ["I-NP", "I-NP", "B-NP", "O", "I-VP"]),
    ("BIOES", ["B-NP", "E-NP", "S-NP", "O", "S-VP"]),
])
def test_tags_of_each_scheme_read_back_as_the_same_chunks(scheme, expected):
    from tasks.tagging_metrics import chunks, tags_of

    spans = [("NP", 0, 1), ("NP", 2, 2), ("VP", 4, 4)]
    assert tags_of(spans, 5, scheme) == expected
    assert chunks(expected) == spans


def test_batched_scores_sum_sentences_as_conlleval_counts():
    from tasks.tagging_metrics import batched_score, flat_rows, metric_rows, sentence_counts

    counts = sentence_counts(GOLD, GUESS)
    rows = flat_rows(counts)[None]  # one seed

    def score(metric, chosen=rows):
        return batched_score(metric)(metric_rows(chosen, counts.types, metric), None)

    assert score("f1") == pytest.approx([2 / 7])
    assert score("accuracy") == pytest.approx([8 / 14])
    assert score("f1_NP") == pytest.approx([0.4])
    assert score("recall") == pytest.approx([0.25])
    # a resample of sentences 1 and 2 twice: 2 correct of 2 guessed, 2 gold: F1 1
    assert score("f1", rows[:, [1, 1]]) == pytest.approx([1.0])


# ---- reading --------------------------------------------------------------------------------------


def _conll(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


CONLL = """-DOCSTART- -X- -X- O

Confidence NN B-NP
in IN B-PP
the DT B-NP
pound NN I-NP


He PRP B-NP
ran VBD B-VP
"""


def test_conll_columns_docstart_and_blank_lines(tmp_path):
    from tasks.tagging_data import read_file

    split = read_file("train", _conll(tmp_path / "train.txt", CONLL))
    assert [s.words for s in split.sentences] == [("Confidence", "in", "the", "pound"), ("He", "ran")]
    assert split.sentences[0].tags == ("B-NP", "B-PP", "B-NP", "I-NP")
    assert split.sentences[1].line == 9


def test_json_lines_and_a_chosen_tag_column(tmp_path):
    from tasks.tagging_data import read_file

    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps({"tokens": ["Ann", "lives"], "tags": ["B-PER", "O"]}) + "\n\n"
                    + json.dumps({"tokens": ["Oslo"], "tags": ["S-LOC"]}) + "\n", encoding="utf-8")
    split = read_file("validation", path)
    assert [(s.words, s.tags, s.line) for s in split.sentences] == [
        (("Ann", "lives"), ("B-PER", "O"), 1), (("Oslo",), ("S-LOC",), 3)]
    ner = _conll(tmp_path / "ner.txt", "Ann B-PER NNP\nlives O VBZ\n")
    assert read_file("train", ner, tag_column=1).sentences[0].tags == ("B-PER", "O")


@pytest.mark.parametrize("name, text, column, message", [
    ("cols.txt", "a x B-NP\nb I-NP\n", -1, "cols.txt:2: 2 columns, but the file's first word line has 3"),
    ("prefix.txt", "a B-NP\nb X-NP\n", -1, "prefix.txt:2: tag 'X-NP' has an unknown prefix"),
    ("pos.txt", "a NN B-NP\n", 1, "pos.txt:1: tag 'NN' has an unknown prefix"),
    ("column.txt", "a NN B-NP\n", 5, "column.txt:1: tag column 5 does not exist: the line has 3 columns"),
    ("words.txt", "a\nb\n", -1, "words.txt:1: a word without a tag column"),
    ("empty.jsonl", '{"tokens": [], "tags": []}\n', -1, "empty.jsonl:1: an empty sentence"),
    ("length.jsonl", '{"tokens": ["a"], "tags": ["O", "O"]}\n', -1, "length.jsonl:1: 1 tokens but 2 tags"),
    ("blank.txt", "\n-DOCSTART- O\n\n", -1, "blank.txt: no sentences in the train file"),
])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, name, text, column, message):
    from tasks.tagging_data import read_file

    with pytest.raises(UserError) as raised:
        read_file("train", _conll(tmp_path / name, text), tag_column=column)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_directory_is_named_a_directory_not_a_missing_file(tmp_path):
    from tasks.tagging_data import read_file

    with pytest.raises(UserError, match=r"train file '.+' is a directory; pass a data file inside it"):
        read_file("train", tmp_path)


def test_non_utf8_bytes_name_their_line(tmp_path):
    from tasks.tagging_data import read_file

    path = tmp_path / "latin1.txt"
    path.write_bytes("a B-NP\nna\xefve I-NP\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"latin1.txt:2: bytes that are not UTF-8"):
        read_file("train", path)


def test_scheme_detected_and_tags_converted_to_bioes(tmp_path):
    from tasks.tagging_data import read
    from tasks.tagging_task import TaggingDescription

    train = _conll(tmp_path / "train.txt", "a I-NP\nb I-NP\nc B-NP\nd O\ne I-VP\n")
    dev = _conll(tmp_path / "dev.txt", "a I-NP\nb O\n\nc I-NP\n")
    data = read(TaggingDescription(train=str(train), dev=str(dev)))
    assert data.task.scheme == "IOB1" and data.task.types == ("NP", "VP")
    assert data.model_tags("train") == [["B-NP", "E-NP", "S-NP", "O", "S-VP"]]
    assert data.task.label_names == ("B-NP", "E-NP", "O", "S-NP", "S-VP")  # sorted, as ELECTRA's mapping
    assert data.record["files"]["train"]["sentences"] == 1
    with pytest.raises(UserError, match=r"train.txt:3: tag 'S-NP' is not in scheme IOB2"):
        read(TaggingDescription(train=str(_conll(tmp_path / "train.txt", "a B-NP\nb I-NP\nc S-NP\n")),
                               dev=str(dev), scheme="IOB2"))
    with pytest.raises(UserError, match="pass --dev FILE"):
        read(TaggingDescription(train=str(train)))


def test_a_few_stray_i_starts_leave_an_iob2_file_iob2(tmp_path):
    """Hand-annotated IOB2 holds stray I- starts (an annotator's slip); the majority of chunk starts
    decides, so predictions stay in the file's own scheme. B- between two chunks of one type is IOB1's."""
    from tasks.tagging_data import read
    from tasks.tagging_task import TaggingDescription

    # chunk starts: B- after nothing (Ann), after O (Oslo, Bob): 3 IOB2 starts; I- after O (Bergen): 1
    train = _conll(tmp_path / "train.txt", "Ann B-PER\nSmith I-PER\nin O\nOslo B-LOC\n\nsaw O\n"
                                           "Bergen I-LOC\n\nBob B-PER\n")
    dev = _conll(tmp_path / "dev.txt", "Eva B-PER\n\nin O\n")
    assert read(TaggingDescription(train=str(train), dev=str(dev))).task.scheme == "IOB2"
    # IOB1: I- starts (Ann, Oslo, Eva), and B- only where a PER chunk follows a PER chunk (Bob)
    iob1 = _conll(tmp_path / "iob1.txt", "Ann I-PER\nBob B-PER\nin O\nOslo I-LOC\n")
    dev1 = _conll(tmp_path / "dev1.txt", "Eva I-PER\n\nin O\n")
    assert read(TaggingDescription(train=str(iob1), dev=str(dev1))).task.scheme == "IOB1"


def test_a_dev_file_of_one_sentence_is_refused_before_training(tiny_model, tmp_path, capsys):
    """A file without blank lines is one sentence: the run would train, then fail to resample it for the
    interval. Refused first, in one line naming the file, with nothing written."""
    from tests.conftest import run_cli

    train = _tagged_corpus(tmp_path / "train.txt", 8, 0)
    stream = _conll(tmp_path / "dev.txt", "the B-NP\ncat I-NP\nsat B-VP\n. O\na B-NP\ndog I-NP\nran B-VP\n")
    code, _, err = run_cli(["run", "tagging", "--model", tiny_model, "--train", train, "--dev", stream,
                            "--output-dir", tmp_path / "out", "--tracking-uri", "none"], capsys)
    assert code == 2 and not (tmp_path / "out").exists()
    assert err.strip().count("\n") == 0
    assert f"{stream}: the dev file is one sentence of 7 words" in err and "put a blank line" in err


# ---- windows and the run ----------------------------------------------------------------------------


def _tagged_corpus(path: Path, sentences: int, seed: int) -> Path:
    """Sentences of the tiny model's words; NP chunks 'the/a ADJ* NOUN', VP 'sat/ran', PP 'on'."""
    import random

    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- O", ""]
    for _ in range(sentences):
        for _ in range(rng.randint(1, 3)):
            lines += [f"{rng.choice(['the', 'a'])} DT B-NP",
                      *(f"{w} JJ I-NP" for w in rng.sample(["big", "small", "red"], rng.randint(0, 2))),
                      f"{rng.choice(['cat', 'dog', 'mat'])} NN I-NP", f"{rng.choice(['sat', 'ran'])} VB B-VP",
                      "on IN B-PP"]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_long_sentence_is_split_into_windows_of_whole_words_and_joined(tiny_model, tmp_path):
    import transformers

    from tasks import tagging
    from tasks.tagging_data import read
    from tasks.tagging_task import TaggingDescription

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    words = ["the", "big", "cat", "sat", "on", "the", "mat", ".", "it", "ran"]
    tags = ["B-NP", "I-NP", "I-NP", "B-VP", "B-PP", "B-NP", "I-NP", "O", "B-NP", "B-VP"]
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"tokens": words, "tags": tags}) + "\n"
                     + json.dumps({"tokens": ["ran"], "tags": ["B-VP"]}) + "\n")
    data = read(TaggingDescription(train=str(train), dev=str(train)))
    built = tagging.build_task(data, tokenizer, max_length=6)  # 4 words a window beside [CLS] and [SEP]
    windows = built.windows["validation"]
    assert [(w.sentence, w.first, w.positions) for w in windows] == [
        (0, 0, (1, 2, 3, 4)), (0, 4, (1, 2, 3, 4)), (0, 8, (1, 2)), (1, 0, (1,))]
    labels = built.train["labels"][0]
    names = data.task.label_names
    assert [names[i] if i >= 0 else None for i in labels] == [None, "B-NP", "I-NP", "E-NP", "S-VP", None]
    # each window predicting the gold BIOES tags of its words: joined, they read back as the gold chunks
    gold = data.model_tags("validation")
    outputs = [np.array([0] + [names.index(gold[w.sentence][w.first + k]) for k in range(len(w.positions))]
                        + [0]) for w in windows]
    assert built.predicted_tags("validation", outputs) == [tags, ["B-VP"]]
    assert built.score("validation", outputs)["f1"] == 1.0
    with pytest.raises(UserError, match=r"train.jsonl:1: a sentence of 10 tokens, more than max_length 6"):
        tagging.build_task(data, tokenizer, max_length=6, long_sentences="refuse")


def test_tagging_batches_pad_to_their_longest_sentence_where_glue_pads_to_a_multiple_of_8(tiny_model, tmp_path):
    """On a CPU a step costs in proportion to its length, so a tagging batch (sentences of ~30 tokens) is
    not rounded up to a multiple of 8; GLUE and the others still are, as their recorded figures ran."""
    import dataclasses

    import torch
    import transformers

    from harness.finetuning import orchestration
    from harness.finetuning.model_setup import ModelSetup
    from tasks import tagging
    from tasks.config import FinetuneConfig
    from tasks.finetune import LoopIO
    from tasks.tagging_data import read
    from tasks.tagging_task import TaggingDescription

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    train = _tagged_corpus(tmp_path / "train.txt", 12, 0)
    data = read(TaggingDescription(train=str(train), dev=str(train)))
    built = tagging.build_task(data, tokenizer, max_length=64)
    lengths = sorted(len(ids) for ids in built.train["input_ids"])
    assert any(length % 8 for length in lengths)  # the check below can tell the two paddings apart
    seen: list[int] = []

    def load_model(built, config, setup):
        model = tagging.load_model(str(tiny_model), built.task)
        model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs["input_ids"].shape[1]),
                                        with_kwargs=True)
        return model

    config = FinetuneConfig(precision="fp32", num_epochs=1, batch_size=1, learning_rate=1e-4,
                            layerwise_lr_decay=1.0, max_length=64)
    setup = ModelSetup(identify(str(tiny_model), str(tiny_model), {}), tokenizer,
                       transformers.AutoConfig.from_pretrained(tiny_model), "small", torch.device("cpu"), "sdpa", "fp32")
    orchestration.train_seed(load_model, built, config, setup, LoopIO(progress=False))
    trained = seen[:len(lengths)]  # one sentence a batch, then the dev predictions
    assert sorted(trained) == lengths
    seen.clear()
    orchestration.train_seed(load_model, dataclasses.replace(built, pad_to_multiple_of=8), config, setup,
                             LoopIO(progress=False))
    assert sorted(seen[:len(lengths)]) == sorted(-(-length // 8) * 8 for length in lengths)


def test_a_sentence_longer_than_the_model_gets_no_indexing_errors_warning(tiny_model, tmp_path):
    """Windows keep every input within max_length, so transformers' warning that a sentence longer than
    the model's positions "will result in indexing errors" (what an OCR page without sentence breaks
    printed) is not given."""
    import logging

    import transformers

    from tasks import tagging
    from tasks.tagging_data import read
    from tasks.tagging_task import TaggingDescription

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model, model_max_length=8)
    train = _conll(tmp_path / "train.txt", "".join(f"{w} O\n" for w in ["the", "cat", "sat"] * 5)
                   + "on B-PP\n\nran B-VP\n")
    data = read(TaggingDescription(train=str(train), dev=str(train)))
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # transformers' own handler writes to a stream pytest has swapped
    logging.getLogger("transformers").addHandler(handler)
    try:
        built = tagging.build_task(data, tokenizer, max_length=8)
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    assert len(built.windows["validation"]) == 4  # 16 words, 6 a window, and the second sentence
    assert not [r for r in records if "indexing errors" in r.getMessage()]


@pytest.fixture(scope="session")
def tagged_runs(tiny_model, tmp_path_factory):
    """Two seeds of a made-up chunking set, and the same at another learning rate."""
    from harness.cli import main

    root = tmp_path_factory.mktemp("tagging")
    train, dev = _tagged_corpus(root / "train.txt", 40, 0), _tagged_corpus(root / "dev.txt", 12, 1)
    for name, rate in (("a", "3e-3"), ("b", "1e-3")):
        assert main([str(a) for a in [
            "run", "tagging", "--model", tiny_model, "--train", train, "--dev", dev, "--name", "phrases",
            "--seeds", "2", "--output-dir", root / name, "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}",
            "precision=fp32", "num_epochs=2", "batch_size=8", f"learning_rate={rate}"]]) == 0
    return root


@pytest.mark.slow
def test_run_tagging_reports_conlleval_f1_per_type_with_intervals(tagged_runs):
    from tasks.tagging_data import read_file
    from tasks.tagging_metrics import conlleval

    results = json.loads((tagged_runs / "a" / "results.json").read_text())
    assert results["format"] == "electra-harness/tagging-results/1"
    assert results["data"]["task"]["types"] == ["NP", "PP", "VP"] and results["data"]["task"]["scheme"] == "IOB2"
    summary = results["summary"]["phrases"]
    for metric in ("f1", "precision", "recall", "accuracy", "f1_NP", "f1_PP", "f1_VP"):
        assert summary[metric]["n"] == 2 and summary[metric]["ci_low"] <= summary[metric]["mean"]
    # the written predictions, scored by conlleval, are seed 0's reported figures
    gold = [s.tags for s in read_file("validation", tagged_runs / "dev.txt").sentences]
    lines = (tagged_runs / "a" / "predictions" / "phrases-seed0" / "validation.jsonl").read_text().splitlines()
    guessed = [json.loads(line)["tags"] for line in lines]
    seed0 = next(r for r in results["runs"] if r["seed"] == 0)
    assert conlleval(gold, guessed)["f1"] == pytest.approx(seed0["metrics"]["validation"]["f1"])
    config = json.loads((tagged_runs / "a" / "models" / "phrases-seed0" / "config.json").read_text())
    assert config["architectures"] == ["ElectraForTokenClassification"] and "S-VP" in config["label2id"]


@pytest.mark.slow
def test_compare_pairs_two_tagging_runs_sentence_by_sentence(tagged_runs, capsys):
    from tests.conftest import run_cli

    code, out, _ = run_cli(["compare", tagged_runs / "a", tagged_runs / "b"], capsys)
    assert code == 0 and "phrases" in out and "f1" in out


@pytest.mark.slow
def test_eval_scores_a_saved_tagger_as_its_run_did_and_compare_pairs_them(tagged_runs, tmp_path, capsys):
    """harness eval tagging on seed 0's saved model: its run's F1 on the same sentences, paired by compare."""
    from tests.conftest import run_cli

    code, _, err = run_cli(["eval", "tagging", "--model", tagged_runs / "a" / "models" / "phrases-seed0",
                            "--train", tagged_runs / "train.txt", "--dev", tagged_runs / "dev.txt", "--name",
                            "phrases", "--output-dir", tmp_path / "ev", "--tracking-uri",
                            f"sqlite:///{tmp_path / 'mlflow.db'}", "precision=fp32"], capsys)
    assert code == 0, err
    run = json.loads((tagged_runs / "a" / "results.json").read_text())
    evaluated = json.loads((tmp_path / "ev" / "results.json").read_text())
    seed0 = next(r for r in run["runs"] if r["seed"] == 0)["metrics"]["validation"]
    assert evaluated["evaluated"] is True
    assert evaluated["runs"][0]["metrics"]["validation"] == pytest.approx(seed0, abs=1e-9)
    code, out, _ = run_cli(["compare", tmp_path / "ev", tagged_runs / "a"], capsys)
    assert code == 0 and "phrases" in out


@pytest.mark.slow
def test_compare_refuses_two_tagging_runs_trained_on_different_files_in_one_line(tagged_runs, tmp_path, capsys):
    """The same dev file, another training file: compare names the task, the file and both sha256."""
    import hashlib

    from tests.conftest import run_cli

    train = tmp_path / "train.txt"
    train.write_text((tagged_runs / "train.txt").read_text() + "the DT B-NP\ncat NN I-NP\nsat VB B-VP\n\n")
    code, _, err = run_cli(["run", "tagging", "--model", tagged_runs / "a" / "models" / "phrases-seed0", "--train",
                            train, "--dev", tagged_runs / "dev.txt", "--name", "phrases", "--output-dir",
                            tmp_path / "c", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "precision=fp32",
                            "num_epochs=1", "batch_size=8"], capsys)
    assert code == 0, err
    code, out, err = run_cli(["compare", tagged_runs / "a", tmp_path / "c"], capsys)
    ours, theirs = (hashlib.sha256(path.read_bytes()).hexdigest()[:12] for path in (tagged_runs / "train.txt", train))
    assert code == 2 and out == "" and err.strip().count("\n") == 0
    assert err.strip() == (f"harness: error: runs A and B were trained or scored on different data: the train file of "
                           f"phrases differs (sha256 {ours} in A, sha256 {theirs} in B); compare runs on the same data")


# ---- export, predict, serve -------------------------------------------------------------------------


def test_raw_text_splits_into_words_with_character_offsets():
    from harness.deploy import tag_spans

    text = "Zoë's café,  in Oslo."
    words = tag_spans.split_words(text, tag_spans.splitter(tag_spans.WORD_SPLITTER))
    assert [w for w, _ in words] == ["Zoë", "'", "s", "café", ",", "in", "Oslo", "."]
    assert all(text[start:end] == word for word, (start, end) in words)  # characters, not UTF-8 bytes
    assert tag_spans.joined_words(["New", "York"]) == [("New", (0, 3)), ("York", (4, 8))]


def test_windows_close_before_the_word_that_would_overflow_them():
    from harness.deploy.tag_spans import bounds

    assert bounds([1, 2, 3, 1], 3) == [(0, 2), (2, 3), (3, 4)]
    assert bounds([1, 0, 2], 3) == [(0, 3)]  # a word without sub-tokens costs nothing
    assert bounds([2, 2], 4) == [(0, 2)]


def test_bioes_tags_decode_to_spans_of_the_text_in_the_tasks_scheme():
    from harness.deploy.tag_spans import joined_words, result

    text = "Ann Lee met Bob in Oslo"
    found = result(text, joined_words(text.split()), ["B-PER", "E-PER", "O", "S-PER", "O", "I-LOC"], "IOB2")
    assert found["tags"] == ["B-PER", "I-PER", "O", "B-PER", "O", "B-LOC"]  # I- after O starts a chunk
    assert found["spans"] == [{"text": "Ann Lee", "type": "PER", "start": 0, "end": 7},
                              {"text": "Bob", "type": "PER", "start": 12, "end": 15},
                              {"text": "Oslo", "type": "LOC", "start": 19, "end": 23}]


def test_an_export_rereads_the_runs_dev_sentences_and_refuses_a_changed_file(tmp_path):
    from harness.deploy.bundle_export import dev_examples
    from tasks.tagging_data import read
    from tasks.tagging_task import TaggingDescription

    train = _conll(tmp_path / "train.txt", "the B-NP\ncat I-NP\nsat B-VP\n")
    dev = _conll(tmp_path / "dev.txt", "a B-NP\ndog I-NP\n\nran B-VP\n")
    data = read(TaggingDescription(train=str(train), dev=str(dev)))
    examples = dev_examples(data.task, None, 64, data.record)
    assert (examples["tokens"], examples["tags"], examples["line"]) == (
        [["a", "dog"], ["ran"]], [["B-NP", "I-NP"], ["B-VP"]], [1, 4])
    dev.write_text("a B-NP\ndog I-NP\n\nsat B-VP\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"^the validation data changed since the run \(sha256"):
        dev_examples(data.task, None, 64, data.record)


@pytest.fixture(scope="session")
def tagging_bundle(tagged_runs):
    """Run a's best seed exported with its int8 model (no --task: the run's own)."""
    from harness.cli import main

    bundle = tagged_runs / "bundle"
    assert main(["export", "onnx", "--run", str(tagged_runs / "a"), "--quantize", "int8", "--output", str(bundle),
                 "--tracking-uri", f"sqlite:///{tagged_runs / 'mlflow.db'}"]) == 0
    return bundle


RAW = "The big cat sat on the mat, and a small dog ran."


@pytest.mark.slow
def test_a_tagger_passed_by_model_is_sent_to_its_run_folder(tagged_runs, tmp_path, capsys):
    """A tagger's tags, scheme and dev file live in its run's results.json, not in the checkpoint: `export
    onnx --model` of one says to pass --run, in one line, and writes nothing (with --task or without)."""
    from harness.cli import main

    model = tagged_runs / "a" / "models" / "phrases-seed0"
    for task in ([], ["--task", "rte"]):
        code = main(["export", "onnx", "--model", str(model), *task, "--output", str(tmp_path / "bundle"),
                     "--tracking-uri", "none"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert "holds a tagger (ElectraForTokenClassification)" in err and "pass --run RUN_DIR" in err
    assert not (tmp_path / "bundle").exists()


@pytest.mark.slow
def test_export_of_a_tagging_run_checks_parity_and_scores_conlleval_f1(tagged_runs, tagging_bundle):
    manifest = json.loads((tagging_bundle / "manifest.json").read_text())
    results = json.loads((tagged_runs / "a" / "results.json").read_text())
    task = results["data"]["task"]
    assert (manifest["kind"], manifest["task"], manifest["outputs"]) == ("token-classification", "phrases",
                                                                         ["tag_logits"])
    assert manifest["labels"] == task["label_names"] and manifest["scheme"] == "IOB2"
    assert manifest["word_splitter"] == "BertPreTokenizer" and manifest["max_length"] == 64  # the model's positions
    assert manifest["parity"]["examples"] == 12 and manifest["parity"]["max_abs_diff"] <= 1e-4
    assert "model.int8.onnx" in manifest["files"]
    # fp32 through the runtime, on the run's dev file: the F1 its seed scored in PyTorch
    seed = next(r for r in results["runs"] if r["seed"] == manifest["source"]["seed"])
    quality = manifest["quality"]
    assert quality["fp32"]["f1"] == pytest.approx(seed["metrics"]["validation"]["f1"], abs=1e-9)
    assert set(quality["int8_vs_fp32"]) == {"same_prediction", "same_tags"}
    assert quality["int8_delta_points"] == pytest.approx(100 * (quality["int8"]["f1"] - quality["fp32"]["f1"]))


@pytest.mark.slow
def test_predict_answers_spans_with_character_offsets_into_the_raw_sentence(tagging_bundle, capsys):
    from harness.deploy import tag_spans
    from harness.deploy.onnx_predictor import Predictor, Request
    from tasks.tagging_metrics import chunks
    from tests.conftest import run_cli

    code, out, _ = run_cli(["predict", "--bundle", tagging_bundle, RAW], capsys)
    assert code == 0
    answer = json.loads(out)
    assert answer["tokens"] == ["The", "big", "cat", "sat", "on", "the", "mat", ",", "and", "a", "small", "dog",
                                "ran", "."]
    spans = answer["spans"]
    assert spans and {s["type"] for s in spans} <= {"NP", "PP", "VP"}
    assert all(RAW[s["start"]:s["end"]] == s["text"] for s in spans)
    # the tags, read as conlleval reads them, are the spans: from a chunk's first word to its last
    offsets = [where for _, where in tag_spans.split_words(RAW, tag_spans.splitter("BertPreTokenizer"))]
    assert spans == [{"text": RAW[offsets[a][0]:offsets[b][1]], "type": entity_type, "start": offsets[a][0],
                      "end": offsets[b][1]} for entity_type, a, b in chunks(answer["tags"])]
    # the same words pre-split: the same tags, offsets into the tokens joined by single spaces
    (split,) = Predictor(tagging_bundle).predict([Request.of_tokens(answer["tokens"])])
    assert split["tags"] == answer["tags"]
    assert all(" ".join(answer["tokens"])[s["start"]:s["end"]] == s["text"] for s in split["spans"])


@pytest.mark.slow
def test_a_long_sentence_is_tagged_in_windows_and_an_empty_one_refused(tagging_bundle, capsys):
    from harness.deploy.onnx_predictor import Predictor, Request
    from tests.conftest import run_cli

    predictor = Predictor(tagging_bundle, "fp32")
    text = " ".join(["the big cat sat on the mat ."] * 10)  # 80 words of one token: 62 fit a window
    (found,) = predictor.predict([Request(text, where="TEXT")])
    assert len(found["tags"]) == 80 and "tagged in 2 windows of whole words" in found["note"]
    assert predictor.rows([Request(text)]) == [2]
    (first,) = predictor.predict([Request.of_tokens(text.split()[:62])])  # the first window alone
    # chunks ending by word 60 ("on", characters 219-221) are read from the first window's tags alone
    early = [s for s in first["spans"] if s["end"] <= 221]
    assert early and [s for s in found["spans"] if s["end"] <= 221] == early
    code, out, err = run_cli(["predict", "--bundle", tagging_bundle, "  "], capsys)
    assert (code, out) == (2, "") and "TEXT: empty text; give some text" in err and err.count("\n") == 1


@pytest.mark.slow
def test_serve_answers_a_tagging_bundle_as_predict_does(tagging_bundle, tmp_path, capsys):
    from tests.serving import Server, call, harness_predict

    records = [{"text": RAW, "id": 1}, {"tokens": ["a", "red", "dog", "sat"]}]
    expected = harness_predict(tagging_bundle, records, tmp_path, capsys)
    server = Server(tagging_bundle, tmp_path / "serve.log")
    try:
        assert call(server.url, json.dumps(records).encode()) == (200, expected)
        status, answer = call(server.url, json.dumps({"text": ""}).encode())
        assert status == 422 and "empty text" in answer["error"]
        status, answer = call(server.url, json.dumps({"tokens": "a dog"}).encode())
        assert status == 400 and "'tokens' must be a non-empty list" in answer["error"]
    finally:
        server.stop()
