"""Long texts (`long_text=truncate|windows`): a label that only text past the first window decides is
learnt from windows and not from truncation; a text's answer is the mean of its windows' logits; the
refusals; and an ONNX bundle of a windows run answers as the torch run did."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from foundation.infra.errors import UserError
from tests.conftest import glue_args, run_cli

# max_length 16 holds 14 text tokens: every text's first window is all filler
MAX_LENGTH, OVERLAP = 16, 4


def _texts(n: int, seed: int) -> list[dict]:
    """Half `sad` (0), half `happy` (1), each word after 20 to 30 filler words: only a later window sees it."""
    rng = random.Random(seed)
    rows = [{"text_a": " ".join(["the"] * rng.randint(20, 30) + [("sad", "happy")[i % 2]] + ["the"] * 3),
             "label": i % 2, "idx": i} for i in range(n)]
    rng.shuffle(rows)
    return rows


def _task():
    from tasks.text_task import TextTask

    return TextTask("long", ("text",), "label", "classification", ("neg", "pos"), ("accuracy",), "accuracy")


def test_windows_learn_a_label_past_the_first_window_and_truncation_cannot(tiny_model):
    import transformers
    from datasets import Dataset

    from tasks import batching, text
    from tasks.config import FinetuneConfig
    from tasks.finetune import finetune

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    splits = {"train": Dataset.from_list(_texts(64, 1)), "validation": Dataset.from_list(_texts(32, 2))}
    accuracy = {}
    for long_text, overlap in (("truncate", None), ("windows", OVERLAP)):
        config = FinetuneConfig(learning_rate=1e-3, layerwise_lr_decay=1.0, num_epochs=10, batch_size=16,
                                max_length=MAX_LENGTH, precision="fp32", long_text=long_text,
                                window_overlap=overlap)
        built = text.build_task(_task(), splits, tokenizer, MAX_LENGTH, overlap=overlap)
        transformers.set_seed(0)
        result = finetune(text.load_model(str(tiny_model), built.task), built, config,
                          batching.collator(tokenizer, built.pad_to_multiple_of))
        assert len(result.outputs["validation"]) == 32  # scored per text, not per window
        accuracy[long_text] = result.metrics["validation"]["accuracy"]
    # truncated, every text reads 14 times "the": one answer for all, right for half of them
    assert accuracy["truncate"] == 0.5
    assert accuracy["windows"] >= 0.9


def test_a_texts_windows_are_the_tokenizers_and_its_answer_their_mean_logits(tiny_model):
    import transformers
    from datasets import Dataset

    from tasks import text

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    rows = [{"text_a": "a cat sat on the mat and a dog sat on the rug", "label": 0, "idx": 0},
            {"text_a": "he ran", "label": 1, "idx": 1}]
    splits = {"train": Dataset.from_list(rows), "validation": Dataset.from_list(rows)}
    built = text.build_task(_task(), splits, tokenizer, 8, overlap=2)
    # 13 tokens in windows of 6 text tokens, each starting 4 after the last (0, 4, 8): 3 windows; "he ran" 1
    assert built.windows_of["validation"] == [0, 0, 0, 1]
    expected = tokenizer([r["text_a"] for r in rows], truncation=True, max_length=8, stride=2,
                         return_overflowing_tokens=True)["input_ids"]
    assert built.evals["validation"]["input_ids"] == expected == built.train["input_ids"]
    assert built.train["labels"] == [0, 0, 0, 1]  # each window its text's label
    outputs = [np.array([1.0, 0.0]), np.array([3.0, 2.0]), np.array([-1.0, 4.0]), np.array([5.0, 6.0])]
    texts = built.documents("validation", outputs)
    assert [t.tolist() for t in texts] == [[1.0, 2.0], [5.0, 6.0]]


def test_long_text_settings_are_checked_in_one_line(tiny_model):
    import transformers

    from harness.config import load_config
    from tasks import sequence_features, text
    from tasks.config import FinetuneConfig
    from tasks.text_task import TextTask

    with pytest.raises(UserError, match=r"window_overlap=8 applies to long_text=windows only"):
        load_config(FinetuneConfig, None, ["window_overlap=8"])
    with pytest.raises(UserError, match=r"long_text='pages'.*truncate, windows|long_text.*pages"):
        load_config(FinetuneConfig, None, ["long_text=pages"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    assert sequence_features.window_overlap(None, 128, tokenizer) == 64  # None: max_length // 2
    with pytest.raises(UserError, match=r"^window_overlap=14 leaves no new token in a window of max_length 16 "
                                        r"\(14 text tokens\); choose window_overlap below 14$"):
        sequence_features.window_overlap(14, 16, tokenizer)
    pair = TextTask("nli", ("premise", "hypothesis"), "label", "classification", ("a", "b"), ("accuracy",),
                    "accuracy")
    with pytest.raises(UserError, match=r"reads one text column, and task 'nli' pairs premise and hypothesis"):
        text.check_windows(pair)


def test_a_glue_run_with_windows_is_refused_before_anything_is_written(tiny_model, session_glue_data, tmp_path,
                                                                      capsys):
    code, _, err = run_cli(glue_args(tiny_model, session_glue_data, tmp_path, "long_text=windows"), capsys)
    assert code == 2
    assert "long_text=windows reads long texts of your own one-text classification" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


def test_long_text_windows_is_a_recipe_departure():
    from harness.config import as_dict
    from reports import recipe
    from tasks.config import FinetuneConfig

    config = FinetuneConfig(long_text="windows", window_overlap=8)
    assert recipe.describe(recipe.departures({"config": as_dict(config)}, "small")) == \
        "long_text=windows, window_overlap=8"
    # a results file written before the setting: truncation, no departure
    old = {key: value for key, value in as_dict(FinetuneConfig()).items() if key != "long_text"}
    assert recipe.departures({"config": old}, "small") == {}


@pytest.mark.slow  # a CLI run, an ONNX export and predict on the tiny model: ~15 s
def test_a_windows_bundle_predicts_the_labels_of_the_torch_run(tiny_model, tmp_path, capsys):
    from harness.deploy.onnx_predictor import Predictor, Request
    from reports import leaderboard

    files = {}
    for split, (n, seed) in {"train": (64, 1), "dev": (32, 2)}.items():
        files[split] = tmp_path / f"{split}.jsonl"
        files[split].write_text("".join(json.dumps({"text": r["text_a"], "label": ("neg", "pos")[r["label"]]})
                                        + "\n" for r in _texts(n, seed)))
    out, tracking = tmp_path / "out", f"sqlite:///{tmp_path / 'ml.db'}"
    code, _, err = run_cli(["run", "text", "--model", tiny_model, "--train", files["train"], "--dev", files["dev"],
                            "--text", "text", "--label", "label", "--output-dir", out, "--tracking-uri", tracking,
                            "precision=fp32", "num_epochs=10", "batch_size=16", "learning_rate=1e-3",
                            "layerwise_lr_decay=1", f"max_length={MAX_LENGTH}", "long_text=windows",
                            f"window_overlap={OVERLAP}"], capsys)
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["settings"] == {"long_text": "windows", "window_overlap": OVERLAP, "aggregate": "mean_logits"}
    assert results["runs"][0]["metrics"]["validation"]["accuracy"] >= 0.9
    row = leaderboard.measured_row(out / "results.json", results)
    assert "long_text=windows" in row.recipe
    predictions = next((out / "predictions").iterdir()) / "validation.jsonl"
    torch_lines = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(torch_lines) == 32  # one line per text

    code, _, err = run_cli(["export", "onnx", "--run", out, "--tracking-uri", tracking], capsys)
    assert code == 0, err
    bundle = next((out / "onnx").iterdir())
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert (manifest["long_text"], manifest["window_overlap"], manifest["aggregate"]) == \
        ("windows", OVERLAP, "mean_logits")
    predictor = Predictor(bundle, "fp32")
    texts = [r["text_a"] for r in _texts(32, 2)]
    answers = predictor.predict([Request(t) for t in texts])
    assert predictor.rows([Request(t) for t in texts]) == [len(predictor.encode([Request(t)]).encodings)
                                                           for t in texts]
    assert [line["text"] for line in torch_lines] == texts  # the dev file's order
    assert [a["label"] for a in answers] == [line["prediction"] for line in torch_lines]
