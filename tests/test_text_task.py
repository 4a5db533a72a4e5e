"""Your own data (`harness run text`): metrics worked by hand, files read and refused, and the whole path
run -> compare -> search -> export -> predict on a tiny model with data the tests make."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[1]


# ---- metrics --------------------------------------------------------------------------------------


def test_macro_and_micro_f1_worked_by_hand():
    from tasks import metrics

    # classes: 0 has tp 1, fn 1 -> 2/3; 1 has tp 1, fp 2 -> 2/4; 2 has fn 1 -> 0; macro = 7/18
    assert metrics.macro_f1([0, 1, 1, 1], [0, 0, 1, 2]) == pytest.approx(7 / 18)
    # labels: 0 tp 1 fn 1 -> 2/3; 1 tp 1 fp 1 -> 2/3; 2 never true nor predicted -> 0
    predicted, gold = [[1, 1, 0], [0, 1, 0]], [[1, 0, 0], [1, 1, 0]]
    assert metrics.macro_f1(predicted, gold) == pytest.approx(4 / 9)
    assert metrics.micro_f1(predicted, gold) == pytest.approx(2 / 3)  # tp 2, fp 1, fn 1


def test_batched_forms_equal_the_pure_functions_on_every_seed():
    from tasks import metrics

    rng = np.random.default_rng(0)
    classes, gold = rng.integers(0, 4, (3, 50)), rng.integers(0, 4, 50)
    classes[1] = 0  # a seed predicting one class: absent classes are not averaged
    assert metrics.batched_macro_f1(classes, gold) == pytest.approx(
        [metrics.macro_f1(row, gold) for row in classes])
    rows, gold_rows = rng.integers(0, 2, (3, 40, 5)), rng.integers(0, 2, (40, 5))
    gold_rows[:, 4] = 0
    rows[:, :, 4] = 0  # a label never true nor predicted counts as 0
    for name in ("macro_f1", "micro_f1"):
        assert metrics.BATCHED_MULTILABEL[name](rows, gold_rows) == pytest.approx(
            [metrics.METRICS[name](row, gold_rows) for row in rows])


# ---- reading --------------------------------------------------------------------------------------


def _csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _read(checkpoint=None, **described):
    from tasks import text_data
    from tasks.text_task import TextDescription

    if "text" in described and isinstance(described["text"], str):
        described["text"] = tuple(described["text"].split(","))
    return text_data.read(TextDescription(**described), checkpoint=checkpoint)


def test_string_labels_are_classes_with_their_names_sorted(tmp_path):
    rows = [f"question {i},{label}" for i, label in enumerate(["DESC", "HUM", "LOC"] * 4)]
    train = _csv(tmp_path / "t.csv", "q,coarse", rows)
    read = _read(train=str(train), text="q", label="coarse")
    assert (read.task.problem, read.task.label_names) == ("classification", ("DESC", "HUM", "LOC"))
    assert read.task.metrics == ("accuracy", "macro_f1", "mcc") and read.task.headline == "accuracy"
    assert read.record["files"]["train"]["sha256"] == hashlib.sha256(train.read_bytes()).hexdigest()


def test_integer_labels_sort_as_numbers_and_fractions_mean_regression(tmp_path):
    rows = [f"text {i},{label}" for i, label in enumerate([2, 10, 1] * 4)]  # 12 rows: a dev split of 2
    classes = _read(train=str(_csv(tmp_path / "c.csv", "s,y", rows)), text="s", label="y")
    assert classes.task.label_names == ("1", "2", "10")
    ids = list(classes.splits["train"]["label"]) + list(classes.splits["validation"]["label"])
    assert sorted(ids) == [0] * 4 + [1] * 4 + [2] * 4  # "1", "2", "10" as ids 0, 1, 2
    scores = _read(train=str(_csv(tmp_path / "r.csv", "s,y", [f"t {i},{i / 3:.3f}" for i in range(20)])),
                   text="s", label="y")
    assert scores.task.problem == "regression" and scores.task.label_names is None
    assert scores.task.headline == "spearman"


def test_lists_are_multilabel_in_json_lines_and_with_a_separator_in_csv(tmp_path):
    rows = [{"body": f"text {i}", "tags": ["b", "a"] if i % 2 else ["c"]} for i in range(20)]
    read = _read(train=str(_jsonl(tmp_path / "t.jsonl", rows)), text="body", label="tags")
    assert (read.task.problem, read.task.label_names) == ("multilabel", ("a", "b", "c"))
    assert read.splits["train"][0]["label"] in ([1.0, 1.0, 0.0], [0.0, 0.0, 1.0])
    csv = _csv(tmp_path / "t.csv", "body,tags", [f"text {i},{'a|b' if i % 2 else 'c'}" for i in range(20)])
    separated = _read(train=str(csv), text="body", label="tags", label_separator="|")
    assert separated.task.label_names == ("a", "b", "c") and separated.task.headline == "micro_f1"


def test_the_problem_flag_and_key_keep_their_former_name_kind_with_a_warning(tmp_path, capsys):
    from harness import kinds
    from harness.cli import build_parser
    from tasks import text_data

    train = _csv(tmp_path / "t.csv", "s,y", [f"t {i},{i}" for i in range(20)])
    task_file = tmp_path / "task.toml"
    task_file.write_text('kind = "regression"\n')
    given = ["run", "text", "--model", "m", "--train", str(train), "--text", "s", "--label", "y"]
    for extra, warned in [(["--kind", "regression"], "--kind is deprecated; use --problem"),
                          (["--task-file", str(task_file)], "setting kind is deprecated; use problem")]:
        described, _ = kinds.load_description(kinds.kind("text"), build_parser().parse_args(given + extra))
        assert described.problem == "regression"
        assert capsys.readouterr().err == f"harness: warning: {warned}\n"
    read = text_data.read(described)  # integers alone would be classes: the description decides
    assert read.task.problem == "regression"
    # results.json keeps its keys: the problem is "kind" in the task's record and in the description
    assert read.record["task"]["kind"] == "regression" and read.record["description"]["kind"] == "regression"
    assert "problem" not in read.record["description"]
    assert text_data.description_of(read.record).problem == "regression"


def test_a_pair_from_parquet_and_a_drawn_dev_split_recorded(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"premise": [f"p {i}" for i in range(20)], "hypothesis": [f"h {i}" for i in range(20)],
            "gold": ["yes", "no"] * 10}
    pq.write_table(pa.table(rows), tmp_path / "pairs.parquet")
    first = _read(train=str(tmp_path / "pairs.parquet"), text="premise,hypothesis", label="gold",
                  dev_fraction=0.25, dev_seed=3)
    again = _read(train=str(tmp_path / "pairs.parquet"), text="premise,hypothesis", label="gold",
                  dev_fraction=0.25, dev_seed=3)
    assert first.record["dev"] == {"drawn_from": "train", "fraction": 0.25, "seed": 3, "train_rows": 15,
                                   "dev_rows": 5}
    assert first.splits["validation"]["idx"] == again.splits["validation"]["idx"]  # the file's row numbers
    assert set(first.splits["validation"]["idx"]).isdisjoint(first.splits["train"]["idx"])
    assert first.splits["train"].column_names == ["text_a", "text_b", "label", "idx"]


def test_prediction_lines_carry_the_row_text_and_gold_label_by_name(tmp_path):
    from harness.finetuning import text_predictions

    rows = {"premise": [f"p {i}" for i in range(20)], "id": [f"h {i}" for i in range(20)],
            "gold": ["yes", "no"] * 10}
    train = _jsonl(tmp_path / "pairs.jsonl", [dict(zip(rows, values, strict=True))
                                                    for values in zip(*rows.values(), strict=True)])
    test = _jsonl(tmp_path / "test.jsonl", [{"premise": "p x", "id": "h x"}])
    read = _read(train=str(train), test=str(test), text="premise,id", label="gold", dev_fraction=0.25)
    dev = read.splits["validation"]
    lines = text_predictions.lines(read.task, dev, ["yes"] * len(dev), "validation" in read.labelled)
    first = dev["idx"][0]  # a drawn dev row: its row in the training file
    assert lines[0] == {"id": first, "row": first, "premise": f"p {first}", "input_id": f"h {first}",
                        "label": rows["gold"][first], "prediction": "yes"}
    assert "test" not in read.labelled  # an unlabelled test file: no gold label on its lines
    assert text_predictions.lines(read.task, read.splits["test"], ["no"], False) == [
        {"id": 0, "row": 0, "premise": "p x", "input_id": "h x", "prediction": "no"}]
    scores = _jsonl(tmp_path / "r.jsonl", [{"s": f"t {i}", "stars": i / 3} for i in range(20)])
    read = _read(train=str(scores), text="s", label="stars")
    dev = read.splits["validation"]
    line = text_predictions.lines(read.task, dev, [2.5] * len(dev), True)[0]
    assert line["stars"] == line["prediction"] == 2.5 and line["label"] == dev["label"][0]
    tags = _jsonl(tmp_path / "m.jsonl", [{"s": f"t {i}", "tags": ["b", "a"] if i % 2 else ["c"]}
                                         for i in range(20)])
    read = _read(train=str(tags), text="s", label="tags")
    gold = text_predictions.lines(read.task, read.splits["validation"], [[]] * 2, True)[0]["label"]
    assert gold in (["a", "b"], ["c"])


def test_the_multilabel_threshold_is_a_setting_recorded_where_it_departs(tmp_path):
    from tasks.text import TextAdapter

    rows = [{"body": f"text {i}", "tags": ["b", "a"] if i % 2 else ["c"]} for i in range(20)]
    train = str(_jsonl(tmp_path / "t.jsonl", rows))
    default, low = _read(train=train, text="body", label="tags"), _read(train=train, text="body", label="tags",
                                                                      threshold=0.3)
    assert "threshold" not in default.record["task"] and "threshold" not in default.record["description"]
    assert low.record["task"]["threshold"] == low.record["description"]["threshold"] == 0.3
    logits = [np.array([-0.5, -1.0, 2.0])]  # sigmoids 0.38, 0.27, 0.88
    for read, expected in ((default, [0, 0, 1]), (low, [1, 0, 1])):
        adapter = TextAdapter(read.task, read.splits["train"], {}, {}, {})
        assert adapter.predictions(logits).tolist() == [expected]
    from tasks.text_task import TextTask

    assert TextTask.from_record(low.record["task"]).threshold == 0.3
    with pytest.raises(ValueError, match=r"threshold must be between 0 and 1, e.g. 0.5 \(got 1.5\)"):
        _read(train=train, text="body", label="tags", threshold=1.5)


def _bad_cases(tmp: Path) -> dict:
    good = ["a b,x", "c d,y", "e f,x"]
    (tmp / "latin1.csv").write_bytes("s,y\nok,x\ncaf\xe9,y\n".encode("latin-1"))
    (tmp / "broken.parquet").write_bytes(b"PAR1 not really")
    (tmp / "bad.jsonl").write_text('{"s": "a", "y": "x"}\n{"s": "b", "y": \n')
    return {
        "missing file": ({"train": str(tmp / "nope.csv")}, "nope.csv' does not exist"),
        "a directory": ({"train": str(tmp)}, f"train file {str(tmp)!r} is a directory; pass a data file"),
        "missing column lists the columns": ({"train": str(_csv(tmp / "c.csv", "s,y", good)), "text": ("txt",)},
                                             "no column 'txt'; its columns are s, y"),
        "empty split": ({"train": str(_csv(tmp / "t.csv", "s,y", good)),
                         "dev": str(_csv(tmp / "e.csv", "s,y", []))}, "e.csv: no rows in the validation"),
        "dev label never trained on": ({"train": str(_csv(tmp / "t2.csv", "s,y", good)),
                                        "dev": str(_csv(tmp / "d.csv", "s,y", ["a,x", "b,z"]))},
                                       "d.csv:3: label 'z' never occurs in training"),
        "mixed label types": ({"train": str(_jsonl(tmp / "m.jsonl", [{"s": "a", "y": "x"}, {"s": "b", "y": 2}]))},
                              "m.jsonl:2: label 2 is number but the column's first label 'x' is text"),
        "empty text cell": ({"train": str(_csv(tmp / "n.csv", "s,y", ["a,x", ",y", "c,x"]))},
                            "n.csv:3: column 's' holds an empty cell"),
        "a number where text belongs": ({"train": str(_jsonl(tmp / "k.jsonl", [{"s": "a", "y": "x"},
                                                                               {"s": 5, "y": "y"}]))},
                                        "k.jsonl:2: column 's' holds a int"),
        "bytes that are not UTF-8": ({"train": str(tmp / "latin1.csv")}, "latin1.csv:3: bytes that are not UTF-8"),
        "duplicate column names": ({"train": str(_csv(tmp / "dup.csv", "s,y,s", ["a,x,b"]))},
                                   "dup.csv:1: duplicate column name(s) 's'"),
        "a JSON line that does not parse": ({"train": str(tmp / "bad.jsonl")}, "bad.jsonl:2: not valid JSON"),
        "a Parquet file that does not parse": ({"train": str(tmp / "broken.parquet")},
                                               "broken.parquet: cannot be read as parquet"),
        "a regression label that is not a number": (
            {"train": str(_csv(tmp / "r.csv", "s,y", ["a,0.5", "b,x"])), "problem": "regression"},
            "r.csv:3: label 'x' is not a finite number"),
        "a nan among integer labels": ({"train": str(_csv(tmp / "nan.csv", "s,y", ["a,1", "b,2", "c,nan", "d,3"]))},
                                       "nan.csv:4: label 'nan' is not a finite number"),
        "an inf among integer labels": ({"train": str(_csv(tmp / "inf.csv", "s,y", ["a,1", "b,-inf", "c,2"]))},
                                        "inf.csv:3: label '-inf' is not a finite number"),
        "a ragged CSV row": ({"train": str(_csv(tmp / "rag.csv", "s,y", ["a,x", "b,y,z"]))},
                             "rag.csv:3: 3 fields where the header has 2"),
        "a benchmark's task name": ({"train": str(_csv(tmp / "t3.csv", "s,y", good)), "name": "sst2"},
                                    "task name 'sst2' is a named task's"),
        "a metric of another problem": ({"train": str(_csv(tmp / "t4.csv", "s,y", good)), "metric": "spearman"},
                                     "metric 'spearman' does not score a classification task"),
        "a dev file of one row": ({"train": str(_csv(tmp / "t5.csv", "s,y", good)),
                                   "dev": str(_csv(tmp / "one.csv", "s,y", ["a,x"]))},
                                  "one.csv: the dev split has 1 row; scores' intervals"),
        "a drawn dev split of one row": ({"train": str(_csv(tmp / "nine.csv", "s,y", good * 3))},
                                         "nine.csv: dev_fraction 0.1 of 9 rows draws 1 dev row"),
    }


@pytest.fixture(scope="module")
def bad_cases(tmp_path_factory):
    return _bad_cases(tmp_path_factory.mktemp("bad"))


BAD = ["missing file", "a directory", "missing column lists the columns", "empty split", "dev label never trained on",
       "mixed label types", "empty text cell", "a number where text belongs", "bytes that are not UTF-8",
       "duplicate column names", "a JSON line that does not parse", "a Parquet file that does not parse",
       "a regression label that is not a number", "a nan among integer labels", "an inf among integer labels",
       "a ragged CSV row", "a benchmark's task name",
       "a metric of another problem", "a dev file of one row", "a drawn dev split of one row"]


@pytest.mark.parametrize("case", BAD)
def test_bad_data_is_one_line_naming_where_and_the_fix(case, bad_cases):
    from foundation.infra.errors import UserError

    described, message = bad_cases[case]
    described = {"text": ("s",), "label": "y"} | described
    with pytest.raises(UserError) as caught:
        _read(**described)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert ";" in text  # the fix follows the problem


def test_eval_reads_a_dev_file_alone_with_the_checkpoints_labels(tmp_path):
    from foundation.infra.errors import UserError
    from tasks.text_data import CheckpointLabels

    dev = str(_csv(tmp_path / "dev.csv", "s,y", ["a,y", "b,x", "c,y"]))
    checkpoint = CheckpointLabels("classification", ("z", "y", "x"))
    data = _read(dev=dev, text="s", label="y", checkpoint=checkpoint)
    assert data.task.label_names == ("z", "y", "x") and data.task.name == "dev"
    assert data.splits["validation"]["label"] == [1, 2, 1] and len(data.splits["train"]) == 0
    assert "train" not in data.record["files"]
    with pytest.raises(UserError, match=r"names no labels \(only LABEL_0, LABEL_1, ...\), so its classes' order "
                                        r"is unknown; pass the --train file it was fine-tuned on"):
        _read(dev=dev, text="s", label="y", checkpoint=CheckpointLabels("classification", ()))
    with pytest.raises(UserError, match="label 'y' never occurs in training"):
        _read(dev=dev, text="s", label="y", checkpoint=CheckpointLabels(None, ("x", "w")))
    with pytest.raises(UserError, match="pass --train FILE"):  # a run still needs its training file
        _read(dev=dev, text="s", label="y")


def test_bad_data_through_the_cli_exits_2_and_writes_nothing(tmp_path, capsys, tiny_model):
    train = _csv(tmp_path / "t.csv", "s,y", ["a,x", ",y"])
    out = tmp_path / "out"
    code, _, err = run_cli(["run", "text", "--model", tiny_model, "--train", train, "--text", "s", "--label",
                            "y", "--output-dir", out, "--tracking-uri", f"sqlite:///{tmp_path / 'ml.db'}"],
                           capsys)
    assert code == 2 and "t.csv:3: column 's' holds an empty cell" in err
    assert not out.exists() and not (tmp_path / "ml.db").exists()


# ---- end to end on a tiny model ------------------------------------------------------------------

WORDS = {"happy": "joy", "good": "joy", "sad": "grief", "bad": "grief", "cat": "animal", "dog": "animal"}


def _rows(n: int, seed: int) -> list[tuple[str, str, float, list[str]]]:
    """Sentences whose class is learnable from a word; a score and tags beside it."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        word = ["happy", "sad", "cat"][i % 3]
        subject = rng.choice(["the film", "he", "she", "a dog"])
        tags = sorted({WORDS[word]} | ({"animal"} if "dog" in subject else set()))
        rows.append((f"{subject} was very {word} .", WORDS[word], i % 3 + rng.random() / 2, tags))
    return rows


@pytest.fixture(scope="session")
def own_data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("own")
    for split, n, seed in (("train", 48, 1), ("dev", 18, 2)):
        with (root / f"{split}.csv").open("w") as handle:
            handle.write("utterance,intent\n")
            handle.writelines(f'"{text}",{label}\n' for text, label, _, _ in _rows(n, seed))
        _jsonl(root / f"{split}.jsonl", [{"sentence": text, "topics": tags, "rating": round(score, 3)}
                                         for text, _, score, tags in _rows(n, seed)])
    return root


FAST = ["precision=fp32", "num_epochs=2", "batch_size=8", "learning_rate=1e-3"]


def _run(model, data_args, out: Path, capsys, *extra):
    return run_cli(["run", "text", "--model", model, *data_args, "--output-dir", out, "--tracking-uri",
                    f"sqlite:///{out.parent / 'mlflow.db'}", *FAST, *extra], capsys)


@pytest.fixture(scope="session")
def classified(model128, own_data, tmp_path_factory):
    """Two seeds of the CSV intents (3 classes, names), and the same with another learning rate."""
    root = tmp_path_factory.mktemp("runs")
    data = ["--train", own_data / "train.csv", "--dev", own_data / "dev.csv", "--text", "utterance",
            "--label", "intent", "--name", "intents", "--seeds", "2"]
    for name, extra in (("a", []), ("b", ["learning_rate=3e-4"])):
        from harness.cli import main

        assert main([str(a) for a in ["run", "text", "--model", model128, *data, "--output-dir",
                                       root / name, "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}",
                                       *FAST, *extra]]) == 0
    return root


@pytest.mark.slow
def test_a_csv_task_keeps_its_names_and_its_data_digest(classified, own_data):
    results = json.loads((classified / "a" / "results.json").read_text())
    assert results["format"] == "electra-harness/text-results/1"
    assert results["data"]["task"]["label_names"] == ["animal", "grief", "joy"]
    sha = hashlib.sha256((own_data / "train.csv").read_bytes()).hexdigest()
    assert results["data"]["files"]["train"]["sha256"] == sha
    summary = results["summary"]["intents"]
    assert summary["accuracy"]["n"] == 2 and summary["accuracy"]["ci_low"] <= summary["accuracy"]["mean"]
    config = json.loads((classified / "a" / "models" / "intents-seed0" / "config.json").read_text())
    assert config["id2label"] == {"0": "animal", "1": "grief", "2": "joy"}
    lines = (classified / "a" / "predictions" / "intents-seed0" / "validation.jsonl").read_text().splitlines()
    assert len(lines) == 18 and {json.loads(line)["prediction"] for line in lines} <= {"animal", "grief", "joy"}
    dev = (own_data / "dev.csv").read_text().splitlines()[1:]
    assert json.loads(lines[3]) | {"prediction": None} == {"id": 3, "row": 3, "utterance": dev[3].split('"')[1],
                                                         "label": dev[3].rsplit(",", 1)[1], "prediction": None}
    scored = json.loads((classified / "a" / "predictions" / "intents-seed0" / "dev_outputs.json").read_text())
    block = scored["splits"]["validation"]
    from tasks import metrics

    assert summary["accuracy"]["best"] >= metrics.accuracy(block["predictions"], block["references"])


@pytest.mark.slow
def test_compare_pairs_runs_on_the_same_files_and_refuses_other_data(classified, own_data, model128, tmp_path,
                                                                      capsys):
    code, out, _ = run_cli(["compare", classified / "a", classified / "b"], capsys)
    assert code == 0 and re.search(r"intents\s+\|\s+accuracy", out)
    changed = tmp_path / "train.csv"
    changed.write_text((own_data / "train.csv").read_text() + '"she was very happy .",joy\n')
    code, _, _ = _run(model128, ["--train", changed, "--dev", own_data / "dev.csv", "--text", "utterance",
                                 "--label", "intent", "--name", "intents"], tmp_path / "c", capsys,
                      "num_epochs=1")
    assert code == 0
    code, _, err = run_cli(["compare", classified / "a", tmp_path / "c"], capsys)
    assert code == 2 and "different data: the train file of intents differs (sha256 " in err


@pytest.mark.slow
def test_a_resume_refuses_a_changed_file(model128, own_data, tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text((own_data / "train.csv").read_text())
    data = ["--train", train, "--dev", own_data / "dev.csv", "--text", "utterance", "--label", "intent"]
    assert _run(model128, data, tmp_path / "out", capsys, "num_epochs=1")[0] == 0
    train.write_text(train.read_text().replace("joy", "grief", 1))
    code, _, err = _run(model128, [*data, "--seeds", "2"], tmp_path / "out", capsys, "num_epochs=1")
    assert code == 2 and "sha256" in err


@pytest.mark.slow
def test_multilabel_from_json_lines_exports_and_predicts_names_with_scores(model128, own_data, tmp_path, capsys):
    data = ["--train", own_data / "train.jsonl", "--text", "sentence", "--label", "topics", "--task-file",
            _task_file(tmp_path)]
    code, out, _ = _run(model128, data, tmp_path / "run", capsys)
    assert code == 0 and "micro_f1" in out
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["data"]["dev"]["dev_rows"] == 5  # dev_fraction 0.1 of 48, from the task file
    assert run_cli(["export", "onnx", "--run", tmp_path / "run", "--quantize", "int8", "--output",
                    tmp_path / "bundle", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"], capsys)[0] == 0
    code, out, _ = run_cli(["predict", "--bundle", tmp_path / "bundle", "a dog was very happy ."], capsys)
    answer = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and set(answer["scores"]) == {"animal", "grief", "joy"}
    assert answer["labels"] == [name for name, p in answer["scores"].items() if p > 0.5]


def _task_file(tmp_path: Path) -> Path:
    path = tmp_path / "task.toml"
    path.write_text('problem = "multilabel"\ndev_fraction = 0.1\nmetric = "macro_f1"\n')
    return path


@pytest.mark.slow
def test_regression_and_a_search_trial_from_the_same_finetuning(model128, own_data, tmp_path, capsys):
    data = ["--train", own_data / "train.jsonl", "--dev", own_data / "dev.jsonl", "--text", "sentence",
            "--label", "rating"]
    code, out, _ = _run(model128, data, tmp_path / "run", capsys)
    assert code == 0 and "spearman" in out
    summary = json.loads((tmp_path / "run" / "results.json").read_text())["summary"]["train"]
    assert set(summary) >= {"spearman", "pearson", "score"}
    code, out, _ = run_cli(["search", "text", "--model", model128, *data, "--trials", "1", "--storage",
                            f"sqlite:///{tmp_path / 'optuna.db'}", "--output-dir", tmp_path / "search",
                            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "precision=fp32",
                            "max_train_examples=16"], capsys)
    best = json.loads((tmp_path / "search" / "best_params.json").read_text())
    assert code == 0 and best["benchmark"] == "text" and best["task"] == "train"


# Slow tier, over 30 s: the only run of README's worked example as a user types it (three `harness`
# processes: fine-tune 3 seeds, export with int8, predict).
@pytest.mark.slow
def test_readme_worked_example_runs_as_written(model128, tmp_path, shared):
    """README's "Your own data" block, run by bash as it stands (MODEL: the tiny model; ../shared linked)."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"## Your own data.*?```bash\n(.*?)```", text, re.S).group(1)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(shared)
    env = os.environ | {"MODEL": str(model128), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                        "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["label"] in ("0", "1") and set(answer["probabilities"]) == {"0", "1"}


def test_a_datasets_folder_or_hub_id_is_read_by_split(tmp_path):
    """--dataset goes to datasets.load_dataset (a Hub id offline from its cache; here a local folder of
    split files, the same call), its splits by name; an id in no cache is one line saying what to do."""
    from foundation.infra.errors import UserError

    folder = tmp_path / "reviews"
    folder.mkdir()
    _csv(folder / "train.csv", "review,stars", [f"text {i},{['good', 'bad'][i % 2]}" for i in range(10)])
    _csv(folder / "validation.csv", "review,stars", ["fine,good", "awful,bad"])
    read = _read(dataset=str(folder), dev_split="validation", text="review", label="stars")
    assert read.task.name == "reviews" and read.task.label_names == ("bad", "good")
    assert len(read.splits["validation"]) == 2 and "dev" not in read.record
    with pytest.raises(UserError, match=r"cannot load nobody/no-such-set\[train\] .*offline, a Hub data set must be "
                                        r"in the datasets cache"):
        _read(dataset="nobody/no-such-set", text="review", label="stars")


def test_a_text_runs_leaderboard_row_names_its_task_and_data():
    from reports import leaderboard, render

    summary = {"accuracy": {"median": 0.5, "mean": 0.52, "ci_low": 0.41, "ci_high": 0.63, "std": 0.0,
                            "best": 0.5, "n": 3}}
    results = {"format": "electra-harness/text-results/1", "model": {"name": "tiny", "path": "/x/tiny"},
               "config": {}, "runs": [], "summary": {"intents": summary},
               "data": {"task": {"name": "intents", "headline": "accuracy"},
                        "files": {"train": {"sha256": "ab" * 32}}}}
    row = leaderboard.measured_row(Path("/x/out/results.json"), results)
    assert row.values["own.intents.abababab"] == 50.0
    assert row.values["own.intents.abababab_ci_low"] == pytest.approx(41.0)
    assert render.title(row) == "tiny · intents (data abababab) · accuracy 50.0 · fine-tuned · FLOPs ?"


def test_the_collator_pads_tag_ids_per_token_but_not_multilabel_targets(tiny_model):
    import transformers

    from tasks import batching

    collate = batching.collator(transformers.AutoTokenizer.from_pretrained(tiny_model))
    rows = [{"input_ids": [2, 5, 3], "attention_mask": [1, 1, 1], "labels": [1.0, 0.0, 1.0, 0.0]},
            {"input_ids": [2, 5, 6, 7, 3], "attention_mask": [1] * 5, "labels": [0.0, 0.0, 0.0, 1.0]}]
    assert collate(rows)["labels"].tolist() == [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    tagged = [{"input_ids": [2, 5, 3], "attention_mask": [1, 1, 1], "labels": [-100, 4, -100]},
              {"input_ids": [2, 5, 6, 3], "attention_mask": [1] * 4, "labels": [-100, 1, 2, -100]}]
    assert collate(tagged)["labels"][0].tolist()[:4] == [-100, 4, -100, -100]
