"""`harness card` and `harness push` on a tiny model fine-tuned through `harness run glue` (2 seeds of RTE
and STS-B, one epoch): the card parses with huggingface_hub and states results.json's numbers; the push
goes as far as the upload call (HfApi methods recorded, no network)."""

import json
import shutil

import pytest

from harness.cli import main
from reports import results_schema
from tests.conftest import run_cli, write_glue_dir, write_tiny_model

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run folder with four saved models (rte and stsb, seeds 0 and 1): ~10 s on two cores."""
    root = tmp_path_factory.mktemp("card")
    code = main(["run", "glue", "--model", str(write_tiny_model(root / "tiny")), "--tasks", "rte,stsb",
                 "--seeds", "2", "--data-dir", str(write_glue_dir(root / "glue")), "--output-dir",
                 str(root / "run"), "--tracking-uri", "none", "num_epochs=1", "batch_size=8", "precision=fp32",
                 "predict_test=false"])
    assert code == 0
    return root / "run"


@pytest.fixture
def results(run):
    return json.loads((run / results_schema.FILE).read_text())


@pytest.mark.slow
def test_the_card_parses_with_huggingface_hub_and_states_the_results_numbers(run, results, capsys):
    from huggingface_hub import ModelCard, metadata_load

    code, out, _ = run_cli(["card", run], capsys)
    folders = sorted(p.name for p in (run / "models").iterdir())
    assert code == 0 and folders == ["rte-seed0", "rte-seed1", "stsb-seed0", "stsb-seed1"]
    assert results["tasks"] == ["stsb", "rte"]  # the registry's order, which the cards follow
    assert out.splitlines() == [f"wrote {run / 'models' / name / 'README.md'}"
                                for name in ("stsb-seed0", "stsb-seed1", "rte-seed0", "rte-seed1")]
    for record in results["runs"]:
        path = run / "models" / f"{record['task']}-seed{record['seed']}" / "README.md"
        card = ModelCard.load(path)
        stated = {(e.dataset_split, e.metric_name.split(" ")[0]): e.metric_value for e in card.data.eval_results}
        expected = {(split, metric): value for split, values in record["metrics"].items()
                    for metric, value in values.items() if metric != "score"}
        assert stated == {key: float(f"{value:.4g}") for key, value in expected.items()}  # to 4 digits
        (index,) = metadata_load(path)["model-index"]
        assert index["name"] == f"tiny-{record['task']}-seed{record['seed']}"
        (result,) = index["results"]
        assert result["dataset"] == {"name": "GLUE " + {"rte": "RTE", "stsb": "STS-B"}[record["task"]],
                                     "type": "nyu-mll/glue", "config": record["task"], "split": "validation"}
        assert result["task"]["type"] == "text-classification"
        assert [m["type"] for m in result["metrics"]] == (["accuracy"] if record["task"] == "rte"
                                                          else ["pearsonr", "spearmanr"])
        assert card.data.base_model is None  # a local checkpoint: no Hub id to name
        name = {"rte": "GLUE RTE", "stsb": "GLUE STS-B"}[record["task"]]
        assert card.text.splitlines()[1] == f"# tiny fine-tuned on {name} (seed {record['seed']})"
        assert 'classify({"text": "a fine film", "text_pair": "it is good"})' in card.text  # a pair task
        text = card.text
        assert f"Seeds 0, 1: this model is seed {record['seed']}." in text
        score = results["summary"][record["task"]]["score"]
        assert f"| score | {score['median']:.4g} | {score['mean']:.4g} |" in text
        assert f"[{score['ci_low']:.4g}, {score['ci_high']:.4g}] | seeds and dev examples |" in text
        # both seeds trained on the same examples: this seed's fine-tuning FLOPs are half the task's
        total = results["flops"]["finetune_flops"][record["task"]]
        assert f"| fine-tuning this seed | {total / 2:.2e} |" in text
        assert f"| fine-tuning {record['task']}, all seeds | {total:.2e} | results.json |" in text
        assert "| pre-training | unknown | unknown: no pretrain_meta.json beside" in text
        assert "Departs from ELECTRA's fine-tuning recipe: batch_size=8, num_epochs=1;" in text
        assert f'"seed": {record["seed"]},' in text  # every setting of this seed


def test_the_base_model_is_named_with_its_revision():
    from harness.publish.card import base_model

    snapshot = f"/cache/hub/models--google--electra-small-discriminator/snapshots/{COMMIT}"
    assert base_model({"name": "google/electra-small-discriminator", "path": snapshot}) == (
        "google/electra-small-discriminator", COMMIT)
    assert base_model({"name": "org/encoder@v1.0", "path": "/cache/x"}) == ("org/encoder", "v1.0")
    assert base_model({"name": "electra-small", "path": snapshot}) == ("google/electra-small-discriminator", COMMIT)
    assert base_model({"name": "runs/pretrain/tiny", "path": "/abs/runs/pretrain/tiny"}) == (None, None)


SHAPE = {"model_type": "electra", "vocab_size": 40, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def _saved(tmp_path, results_format, task, metrics, id2label=None, seed=0, **blocks):
    """A finished run's results.json body and its saved model folder (config.json only: a card reads the
    shape, for this seed's FLOPs, and id2label), with no training: (results, SavedModel)."""
    from harness.publish.saved import SavedModel

    folder = tmp_path / "run" / "models" / f"{task}-seed{seed}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(SHAPE | {"id2label": id2label or {"0": "LABEL_0"}}))
    score = metrics["validation"]["score"]
    record = {"task": task, "seed": seed, "metrics": metrics, "score": score, "num_train_steps": 10,
              "num_train_examples": 40, "train_examples_seen": 40, "resolved_config": {"max_length": 64}}
    stats = {"median": score, "mean": score, "std": 0.0, "best": score, "n": 1, "ci_low": score - 0.1,
             "ci_high": score + 0.1}
    results = results_schema.body(results_format, {"name": "org/encoder@v2", "path": str(tmp_path)}, {}, [task], 1,
                                  device="cpu", versions={}, **blocks) | {
        "runs": [record], "summary": {task: {"score": stats}},
        "flops": {"pretrain_flops": None, "finetune_flops": {task: 254340587520.0}, "num_params": 20352}}
    return results, SavedModel(task, seed, folder, record)


def test_a_squad_card_states_its_percent_scores_as_question_answering(tmp_path):
    from huggingface_hub import ModelCard

    from harness.publish.card import model_card

    metrics = {"validation": {"exact": 61.5, "f1": 64.25, "best_exact": 62.0, "best_f1": 65.0, "score": 64.25}}
    results, saved = _saved(tmp_path, results_schema.SQUAD_FORMAT, "squad_v2", metrics, seed=3)
    card = ModelCard(str(model_card(results, saved)))
    assert {(e.task_type, e.dataset_type, e.dataset_config, e.metric_type, e.metric_value)
            for e in card.data.eval_results} == {
        ("question-answering", "rajpurkar/squad_v2", None, name, value)
        for name, value in metrics["validation"].items() if name != "score"}
    assert (card.data.base_model, card.data.model_name) == ("org/encoder", "encoder-squad_v2-seed3")
    assert (card.data.pipeline_tag, card.data.datasets) == ("question-answering", ["rajpurkar/squad_v2"])
    assert "[org/encoder](https://huggingface.co/org/encoder) at revision `v2`" in card.text
    assert card.text.startswith("\n# org/encoder@v2 fine-tuned on SQuAD 2.0 (seed 3)\n")
    assert 'answer = pipeline("question-answering", model="ORG/NAME")' in card.text


# Your own files as results.json records them: the task, its description, each file's sha256.
SHA = "d9f886f5f8c3" + "0" * 52
OWN_TEXT = {"task": {"name": "reviews", "kind": "classification", "text_columns": ["text"], "label_column": "label",
                     "label_names": ["neg", "pos"]},
            "description": {"train": "/data/reviews.csv", "dataset": "", "dataset_config": "", "name": ""},
            "files": {"train": {"source": "/data/reviews.csv", "sha256": SHA, "rows": 24}},
            "dev": {"drawn_from": "train", "fraction": 0.1, "seed": 0, "train_rows": 21, "dev_rows": 3}}
OWN_TAGS = {"task": {"name": "phrases", "kind": "tagging", "types": ["NP", "VP"], "scheme": "IOB2",
                     "label_names": ["B-NP", "E-NP", "O", "S-VP"]},
            "description": {"task": "", "train": "/data/train.txt", "dev": "/data/dev.txt", "name": "phrases"},
            "files": {"train": {"source": "/data/train.txt", "sha256": SHA, "sentences": 40, "tokens": 300},
                      "validation": {"source": "/data/dev.txt", "sha256": SHA, "sentences": 12, "tokens": 90}}}
CLASSES = {"validation": {"accuracy": 0.38333333333333336, "macro_f1": 0.25, "score": 0.38333333333333336}}
TAGS = {"validation": {"f1": 0.28571428571428575, "precision": 0.25, "score": 0.28571428571428575}}


def _card(tmp_path, results_format, task, metrics, id2label=None, **blocks):
    from huggingface_hub import ModelCard

    from harness.publish.card import model_card

    results, saved = _saved(tmp_path, results_format, task, metrics, id2label, **blocks)
    return ModelCard(str(model_card(results, saved)))  # as `harness card` writes it, parsed back


@pytest.mark.parametrize("results_format, task, metrics, data, pipeline_tag, datasets", [
    (results_schema.GLUE_FORMAT, "rte", CLASSES, None, "text-classification", ["nyu-mll/glue"]),
    (results_schema.TEXT_FORMAT, "reviews", CLASSES, OWN_TEXT, "text-classification", None),
    (results_schema.TEXT_FORMAT, "imdb", CLASSES, OWN_TEXT | {"description": {"dataset": "stanfordnlp/imdb"}},
     "text-classification", ["stanfordnlp/imdb"]),
    (results_schema.TAGGING_FORMAT, "phrases", TAGS, OWN_TAGS, "token-classification", None),
    (results_schema.TAGGING_FORMAT, "chunk", TAGS, OWN_TAGS | {"description": {"task": "chunk"}},
     "token-classification", ["eriktks/conll2000"]),
])
def test_each_kind_states_its_hub_task_and_a_data_set_only_where_it_is_a_hub_id(
        tmp_path, results_format, task, metrics, data, pipeline_tag, datasets):
    card = _card(tmp_path, results_format, task, metrics, **({"data": data} if data else {}))
    assert (card.data.pipeline_tag, card.data.datasets) == (pipeline_tag, datasets)
    assert {e.task_type for e in card.data.eval_results} == {pipeline_tag}
    if datasets is None:  # your own files: named by the task in model-index, described with their sha256 in the text
        assert {e.dataset_type for e in card.data.eval_results} == {task}
        assert f"sha256 `{SHA}`" in card.text and "datasets:" not in str(card)
    assert f"pipeline(\"{pipeline_tag}\", model=\"ORG/NAME\")" in card.text


def test_a_card_has_a_readable_title_label_names_and_a_usage_snippet(tmp_path):
    card = _card(tmp_path, results_schema.TEXT_FORMAT, "reviews", CLASSES, {"0": "neg", "1": "pos"}, data=OWN_TEXT)
    lines = card.text.splitlines()
    assert lines[1] == "# org/encoder@v2 fine-tuned on reviews (seed 0)"  # the digest is in the text, not the title
    assert "Labels (config.json's id2label, id order), one per text (softmax): neg, pos." in lines
    assert "- validation: 3 rows drawn from train (fraction 0.1, seed 0); the model trained on the other 21" in lines
    assert 'classify("a fine film")' in lines
    assert "harness export onnx --run RUN --task reviews --seed 0   # writes RUN/onnx/reviews-seed0" in lines
    assert 'harness predict --bundle RUN/onnx/reviews-seed0 "a fine film"' in lines
    tagger = _card(tmp_path / "t", results_schema.TAGGING_FORMAT, "phrases", TAGS,
                   {"0": "B-NP", "1": "E-NP", "2": "O", "3": "S-VP"}, data=OWN_TAGS)
    assert tagger.text.splitlines()[1] == "# org/encoder@v2 fine-tuned on phrases (seed 0)"
    assert ("Tags (config.json's id2label, id order): B-NP, E-NP, O, S-VP. The model tags in BIOES, each word's "
            "first sub-token, for the types NP, VP; the training files were in IOB2") in tagger.text
    assert 'harness predict --bundle RUN/onnx/phrases-seed0 "the cat sat on the mat"' in tagger.text


def test_a_card_rounds_scores_to_4_significant_digits_and_flops_to_scientific_notation(tmp_path):
    card = _card(tmp_path, results_schema.TEXT_FORMAT, "reviews", CLASSES, data=OWN_TEXT)
    assert "0.38333333333333336" not in str(card) and "254340587520" not in str(card)
    assert [e.metric_value for e in card.data.eval_results] == [0.3833, 0.25]
    assert "| validation | accuracy | 0.3833 |" in card.text
    assert "| score | 0.3833 | 0.3833 | 0 | 0.3833 | 1 | [0.2833, 0.4833] |" in card.text
    assert "| fine-tuning reviews, all seeds | 2.54e+11 | results.json |" in card.text
    assert "Encoder parameters: 20,352." in card.text


def test_a_regressor_and_a_multilabel_classifier_are_used_as_such(tmp_path):
    regression = OWN_TEXT | {"task": OWN_TEXT["task"] | {"kind": "regression", "label_column": "rating"}}
    scores = {"validation": {"spearman": 0.5, "pearson": 0.25, "score": 0.5}}
    card = _card(tmp_path / "r", results_schema.TEXT_FORMAT, "reviews", scores, data=regression)
    assert 'pipeline("text-classification", model="ORG/NAME", function_to_apply="none")' in card.text
    assert "One score per text (regression), the label column `rating`." in card.text
    assert card.data.eval_results[0].task_name == "Text regression"
    multilabel = OWN_TEXT | {"task": OWN_TEXT["task"] | {"kind": "multilabel"}}
    card = _card(tmp_path / "m", results_schema.TEXT_FORMAT, "reviews", CLASSES, {"0": "joy", "1": "grief"},
                 data=multilabel)
    assert 'pipeline("text-classification", model="ORG/NAME", top_k=None)' in card.text
    assert "Labels (config.json's id2label, id order), each scored on its own (sigmoid): joy, grief." in card.text


def test_card_help_says_95_percent_and_takes_a_run_of_any_kind(capsys):
    with pytest.raises(SystemExit):
        main(["card", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "95% interval" in out and "%%" not in out
    assert "RUN_DIR output directory of a `harness run` of any kind (glue, squad, text, tagging)" in out


def test_an_eval_run_is_told_apart_from_a_run_with_save_models_false(tmp_path, capsys):
    results, saved = _saved(tmp_path, results_schema.TEXT_FORMAT, "reviews", CLASSES, data=OWN_TEXT)
    (tmp_path / "run" / results_schema.FILE).write_text(json.dumps(results))
    evaluated = tmp_path / "ev"
    evaluated.mkdir()
    model = {"name": str(saved.folder), "path": str(saved.folder)}
    (evaluated / results_schema.FILE).write_text(json.dumps(results | {
        "model": model, "evaluated": True, "config": {"save_models": False}}))
    code, out, err = run_cli(["card", evaluated], capsys)
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {str(evaluated)!r} is a `harness eval` run: it scored {saved.folder} and saves "
                   f"no model; run `harness card {tmp_path / 'run'}`, the run that saved it\n")
    shutil.rmtree(tmp_path / "run" / "models")  # a run that saved its models, since moved away
    code, _, err = run_cli(["card", tmp_path / "run"], capsys)
    assert code == 2 and err.endswith("results.json): its models/ folder is gone; pass the folder that holds it, "
                                      "or fine-tune again\n")


@pytest.mark.slow
def test_a_run_without_saved_models_is_one_line(run, tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    results = json.loads((run / results_schema.FILE).read_text())
    results["config"]["save_models"] = False  # as save_models=false leaves it
    (bare / results_schema.FILE).write_text(json.dumps(results))
    code, out, err = run_cli(["card", bare], capsys)
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {str(bare)!r} has no saved model (models/<task>-seed<N>/ with a record in "
                   "results.json): it ran with save_models=false; fine-tune again with save_models=true into a "
                   "new --output-dir\n")
    code, _, err = run_cli(["card", tmp_path / "nowhere"], capsys)
    assert code == 2 and err.count("\n") == 1 and "has no results.json" in err


@pytest.fixture
def hub(monkeypatch):
    """Online with a token, HfApi's two calls recorded (the folder's files and card as uploaded)."""
    import huggingface_hub
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    calls = []

    def create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", repo_id, kwargs))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs):
        folder = kwargs["folder_path"]
        files = sorted(p.name for p in __import__("pathlib").Path(folder).iterdir())
        calls.append(("upload_folder", kwargs["repo_id"], {**kwargs, "files": files,
                                                           "card": huggingface_hub.metadata_load(
                                                               f"{folder}/README.md")}))

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    return calls


@pytest.mark.slow
def test_push_uploads_the_best_seed_with_its_card(run, results, hub, capsys):
    best = max((r for r in results["runs"] if r["task"] == "stsb"), key=lambda r: r["score"])
    for name in ("stsb-seed0", "stsb-seed1"):  # no card yet: push writes it first
        (run / "models" / name / "README.md").unlink(missing_ok=True)
    code, out, err = run_cli(["push", run, "--repo", "me/tiny-stsb", "--private", "--task", "stsb"], capsys)
    assert code == 0, err
    folder = run / "models" / f"stsb-seed{best['seed']}"
    (create, upload) = hub
    assert create == ("create_repo", "me/tiny-stsb", {"repo_type": "model", "private": True, "exist_ok": True})
    assert (upload[1], upload[2]["folder_path"], upload[2]["repo_type"]) == ("me/tiny-stsb", str(folder), "model")
    assert upload[2]["files"] == ["README.md", "config.json", "model.safetensors", "tokenizer.json",
                                   "tokenizer_config.json"]
    metrics = upload[2]["card"]["model-index"][0]["results"][0]["metrics"]
    assert [m["value"] for m in metrics] == [float(f"{best['metrics']['validation'][name]:.4g}")
                                             for name in ("pearson", "spearman")]
    assert ('classify = pipeline("text-classification", model="me/tiny-stsb", function_to_apply="none")'
            in (folder / "README.md").read_text())  # the snippet names the repository it went to
    assert out.splitlines()[-1] == (f"uploaded {folder} (stsb seed {best['seed']}) to "
                                    "https://huggingface.co/me/tiny-stsb")
    # two tasks saved: which one must be said
    code, _, err = run_cli(["push", run, "--repo", "me/x"], capsys)
    assert code == 2 and err == ("harness: error: the run saved models of stsb, rte; pass --task with one of "
                                 "them\n")
    assert len(hub) == 2  # nothing uploaded


def test_push_is_refused_offline_or_without_a_token(tmp_path, monkeypatch, capsys):
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, out, err = run_cli(["push", tmp_path, "--repo", "me/x"], capsys)
    assert (code, out) == (2, "") and err == (
        "harness: error: harness push needs the Hugging Face Hub, but HF_HUB_OFFLINE is set; unset it "
        "(HF_HUB_OFFLINE=0) on a machine that can reach huggingface.co\n")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    code, _, err = run_cli(["push", tmp_path, "--repo", "me/x"], capsys)
    assert code == 2 and err == ("harness: error: harness push needs a Hugging Face token with write access; "
                                 "run `hf auth login` or set HF_TOKEN\n")
    code, _, err = run_cli(["push", tmp_path, "--repo", "me/bad name"], capsys)
    assert code == 2 and err.startswith("harness: error: --repo 'me/bad name' is not a Hub repository id")
