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
        assert stated == expected  # exactly the floats in results.json
        (index,) = metadata_load(path)["model-index"]
        assert index["name"] == f"tiny-{record['task']}-seed{record['seed']}"
        (result,) = index["results"]
        assert result["dataset"] == {"name": "GLUE " + {"rte": "RTE", "stsb": "STS-B"}[record["task"]],
                                     "type": "nyu-mll/glue", "config": record["task"], "split": "validation"}
        assert result["task"]["type"] == "text-classification"
        assert [m["type"] for m in result["metrics"]] == (["accuracy"] if record["task"] == "rte"
                                                          else ["pearsonr", "spearmanr"])
        assert card.data.base_model is None  # a local checkpoint: no Hub id to name
        text = card.text
        assert f"Seeds 0, 1: this model is seed {record['seed']}." in text
        score = results["summary"][record["task"]]["score"]
        assert f"| score | {score['median']!r} | {score['mean']!r} |" in text
        assert f"[{score['ci_low']!r}, {score['ci_high']!r}] | seeds and dev examples |" in text
        # both seeds trained on the same examples: this seed's fine-tuning FLOPs are half the task's
        total = results["flops"]["finetune_flops"][record["task"]]
        assert f"| fine-tuning this seed | {total / 2!r} |" in text
        assert f"| fine-tuning {record['task']}, all seeds | {total!r} | results.json |" in text
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


def test_a_squad_card_states_its_percent_scores_as_question_answering(tmp_path):
    from huggingface_hub import ModelCard

    from harness.publish.card import model_card
    from harness.publish.saved import SavedModel

    folder = tmp_path / "models" / "squad_v2-seed3"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({  # a card reads only the shape, for this seed's FLOPs
        "model_type": "electra", "vocab_size": 40, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}))
    metrics = {"validation": {"exact": 61.5, "f1": 64.25, "best_exact": 62.0, "best_f1": 65.0, "score": 64.25}}
    record = {"task": "squad_v2", "seed": 3, "metrics": metrics, "score": 64.25, "num_train_steps": 10,
              "num_train_examples": 40, "train_examples_seen": 40, "resolved_config": {"max_length": 64}}
    summary = {"squad_v2": {"f1": {"median": 64.25, "mean": 64.25, "std": 0.0, "best": 64.25, "n": 1}}}
    results = results_schema.body(results_schema.SQUAD_FORMAT, {"name": "org/encoder@v2", "path": str(tmp_path)},
                                  {}, ["squad_v2"], 1, device="cpu", versions={}) | {
        "runs": [record], "summary": summary, "flops": {"pretrain_flops": None, "finetune_flops": {"squad_v2": 8.0}}}
    card = ModelCard(str(model_card(results, SavedModel("squad_v2", 3, folder, record))))
    assert {(e.task_type, e.dataset_type, e.dataset_config, e.metric_type, e.metric_value)
            for e in card.data.eval_results} == {
        ("question-answering", "rajpurkar/squad_v2", None, name, value)
        for name, value in metrics["validation"].items() if name != "score"}
    assert (card.data.base_model, card.data.model_name) == ("org/encoder", "encoder-squad_v2-seed3")
    assert "[org/encoder](https://huggingface.co/org/encoder) at revision `v2`" in card.text


@pytest.mark.slow
def test_a_run_without_saved_models_is_one_line(run, tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run / results_schema.FILE, bare / results_schema.FILE)  # as save_models=false leaves it
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
    assert [m["value"] for m in metrics] == [best["metrics"]["validation"]["pearson"],
                                             best["metrics"]["validation"]["spearman"]]
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
