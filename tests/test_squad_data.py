"""SQuAD JSON reading, validation and the by-article split, on tiny files and on the real dev sets."""

import json

import datasets
import pytest

from foundation.infra.errors import UserError
from tasks import squad_data
from tasks.squad_data import load_squad_hub, load_squad_json, split_by_article, squad_file

CONTEXT = "Paris is the capital of France."


def _qa(qid, text="Paris", start=0, **extra):
    return {"id": qid, "question": "Which city?", "answers": [{"text": text, "answer_start": start}], **extra}


def _write(tmp_path, articles, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": "1.1", "data": articles}))
    return path


def _article(title, *qas):
    return {"title": title, "paragraphs": [{"context": CONTEXT, "qas": list(qas)}]}


def test_reads_v1_into_flat_rows(tmp_path):
    path = _write(tmp_path, [_article("France", _qa("q1"), _qa("q2", "France", 24))])
    examples, num_bad = load_squad_json(path, "1.1")
    assert num_bad == 0
    assert examples[1] == {
        "id": "q2",
        "title": "France",
        "context": CONTEXT,
        "question": "Which city?",
        "answers": {"text": ["France"], "answer_start": [24]},
        "is_impossible": False,
    }


def test_reads_v2_unanswerable_without_plausible_answers(tmp_path):
    impossible = {
        "id": "q2",
        "question": "Which river?",
        "answers": [],
        "plausible_answers": [{"text": "Paris", "answer_start": 0}],
        "is_impossible": True,
    }
    path = _write(tmp_path, [_article("France", _qa("q1", is_impossible=False), impossible)])
    examples, num_bad = load_squad_json(path, "2.0")
    assert (examples["is_impossible"], num_bad) == ([False, True], 0)
    assert examples[1]["answers"] == {"text": [], "answer_start": []}


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"data": [\n  {"title": "A",\n  }\n]}')
    with pytest.raises(UserError, match=r"broken\.json is not valid JSON: .* at line 3 column 3"):
        load_squad_json(path, "1.1")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("\n")
    with pytest.raises(UserError, match=r"empty\.json is empty"):
        load_squad_json(path, "1.1")


def test_file_without_questions(tmp_path):
    path = _write(tmp_path, [{"title": "France", "paragraphs": [{"context": CONTEXT, "qas": []}]}])
    with pytest.raises(UserError, match="holds no questions"):
        load_squad_json(path, "1.1")


def test_question_without_id_names_article_and_paragraph(tmp_path):
    no_id = _qa("q2")
    del no_id["id"]
    path = _write(tmp_path, [_article("France", _qa("q1"), no_id)])
    with pytest.raises(UserError, match=r"question 1 in paragraph 0 of article 'France' has no 'id'"):
        load_squad_json(path, "1.1")


def test_repeated_id(tmp_path):
    path = _write(tmp_path, [_article("France", _qa("q1")), _article("Spain", _qa("q1"))])
    with pytest.raises(UserError, match=r"repeats question id 'q1' \(in paragraph 0 of article 'Spain'\)"):
        load_squad_json(path, "1.1")


def test_v2_field_in_v1_file_says_use_version_2(tmp_path):
    path = _write(tmp_path, [_article("France", _qa("q1", is_impossible=False))])
    with pytest.raises(UserError, match=r"'q1' has 'is_impossible'.*use --version 2\.0"):
        load_squad_json(path, "1.1")


def test_unknown_version(tmp_path):
    with pytest.raises(UserError, match=r"unknown SQuAD version '2'; choose one of 1\.1, 2\.0"):
        load_squad_json(tmp_path / "x.json", "2")


def test_bad_answers_are_counted_reported_and_kept(tmp_path):
    qas = [
        _qa("good"),
        _qa("past_end", "France.", 27),  # 27 + 7 = 34 > 31 chars
        _qa("mismatch", "Lyon", 0),  # context[0:4] is "Pari"
        _qa("no_answers", answers=[]),
    ]
    path = _write(tmp_path, [_article("France", *qas)])
    expected = r"3 answer problems, kept as is \(first: 'past_end' answer \[27:34\] lies outside"
    with pytest.warns(UserWarning, match=expected):
        examples, num_bad = load_squad_json(path, "1.1")
    assert num_bad == 3
    assert list(examples["id"]) == ["good", "past_end", "mismatch", "no_answers"]
    assert examples[2]["answers"] == {"text": ["Lyon"], "answer_start": [0]}


def test_squad_file_lists_what_is_there(tmp_path):
    (tmp_path / "dev-v1.1.json").write_text("{}")
    assert squad_file(tmp_path, "1.1", "dev") == tmp_path / "dev-v1.1.json"
    with pytest.raises(UserError, match=r"train-v1\.1\.json not found \(JSON files there: dev-v1\.1\.json\)"):
        squad_file(tmp_path, "1.1", "train")


def test_hub_failure_says_pass_data_dir(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(squad_data.datasets, "load_dataset", offline)
    with pytest.raises(UserError, match=r"rajpurkar/squad_v2 .*no network.*pass --data-dir"):
        load_squad_hub("2.0", "validation")


def test_hub_rows_get_is_impossible(monkeypatch):
    row = {"id": "a", "title": "T", "context": CONTEXT, "question": "?"}
    rows = [
        {**row, "answers": {"text": ["Paris"], "answer_start": [0]}},
        {**row, "id": "b", "answers": {"text": [], "answer_start": []}},
    ]
    hub_schema = datasets.Features({k: v for k, v in squad_data.SCHEMA.items() if k != "is_impossible"})
    hub = datasets.Dataset.from_list(rows, features=hub_schema)
    monkeypatch.setattr(squad_data.datasets, "load_dataset", lambda name, split: hub)
    assert list(load_squad_hub("2.0", "validation")["is_impossible"]) == [False, True]


def _toy_examples(num_articles):
    rows = [
        {"id": f"{a}-{q}", "title": f"article{a}", "context": CONTEXT, "question": "?",
         "answers": {"text": ["Paris"], "answer_start": [0]}, "is_impossible": False}
        for a in range(num_articles) for q in range(3)
    ]  # fmt: skip
    return datasets.Dataset.from_list(rows, features=squad_data.SCHEMA)


def test_split_by_article_is_disjoint_complete_and_pinned():
    train, dev = split_by_article(_toy_examples(10), dev_fraction=0.2, seed=0)
    assert not set(train["title"]) & set(dev["title"])
    assert sorted(list(train["id"]) + list(dev["id"])) == sorted(_toy_examples(10)["id"])
    # Pinned: a change to the shuffle would silently move every reported dev score.
    assert sorted(set(dev["title"])) == ["article7", "article8"]
    assert len(dev) == 6


def test_split_by_article_rejects_bad_fraction_and_single_article():
    with pytest.raises(UserError, match="dev_fraction 1.5 must be between 0 and 1"):
        split_by_article(_toy_examples(3), dev_fraction=1.5)
    with pytest.raises(UserError, match=r"cannot split 1 article\(s\)"):
        split_by_article(_toy_examples(1))


@pytest.fixture
def squad_dir(shared):
    if not (shared / "data" / "squad" / "dev-v2.0.json").is_file():
        pytest.skip(f"no SQuAD dev files in {shared / 'data' / 'squad'}")
    return shared / "data" / "squad"


def test_real_dev_v1_counts_and_reproducible_split(squad_dir):
    examples, num_bad = load_squad_json(squad_file(squad_dir, "1.1", "dev"), "1.1")
    assert (len(examples), len(set(examples["title"])), num_bad) == (10570, 48, 0)
    train, dev = split_by_article(examples, dev_fraction=0.2, seed=0)
    again_train, again_dev = split_by_article(examples, dev_fraction=0.2, seed=0)
    assert (list(train["id"]), list(dev["id"])) == (list(again_train["id"]), list(again_dev["id"]))
    assert not set(train["title"]) & set(dev["title"])
    assert len(set(dev["title"])) == 10  # round(0.2 * 48)
    assert len(train) + len(dev) == 10570


def test_real_dev_v2_counts(squad_dir):
    examples, num_bad = load_squad_json(squad_file(squad_dir, "2.0", "dev"), "2.0")
    assert (len(examples), sum(examples["is_impossible"]), num_bad) == (11873, 5945, 0)
    assert sum(1 for answers in examples["answers"] if not answers["text"]) == 5945
