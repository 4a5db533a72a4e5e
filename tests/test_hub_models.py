"""Models named by Hub id: a snapshot read offline, safetensors preferred to the pickle, one line when
weights are missing or the Hub cannot be reached; a broken config.json named as such."""

import pytest

from tests.conftest import glue_args, run_cli, write_tiny_model


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """snapshot_download over local folders: copies the repo's files matching allow_patterns into a cache."""
    import fnmatch
    import shutil

    import huggingface_hub

    repos, calls = tmp_path / "hub", []

    def snapshot_download(repo_id, revision=None, allow_patterns=None):
        calls.append(list(allow_patterns))
        snapshot = tmp_path / "cache" / repo_id
        snapshot.mkdir(parents=True, exist_ok=True)
        for file in (repos / repo_id).iterdir():
            if any(fnmatch.fnmatch(file.name, p) for p in allow_patterns):
                shutil.copy(file, snapshot / file.name)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return repos, calls


def test_hub_repo_with_only_pytorch_bin_loads(fake_hub, tiny_model):
    import shutil

    import torch
    import transformers
    from safetensors.torch import load_file

    from pretrain.models.resolve import resolve_model
    from tasks.loading import from_pretrained_quietly

    repos, calls = fake_hub
    repo = repos / "google/electra-small-discriminator"  # as Google published it: weights as a .bin only
    shutil.copytree(tiny_model, repo)
    weights = load_file(repo / "model.safetensors")
    (repo / "model.safetensors").unlink()
    torch.save(weights, repo / "pytorch_model.bin")
    folder = resolve_model("electra-small")
    assert calls == [["*.json", "*.txt", "*.model", "*.safetensors"],
                     ["*.json", "*.txt", "*.model", "pytorch_model*.bin"]]
    model = from_pretrained_quietly(transformers.ElectraForPreTraining, folder)
    assert torch.equal(model.state_dict()["electra.embeddings.word_embeddings.weight"],
                       weights["electra.embeddings.word_embeddings.weight"])


def test_hub_repo_with_safetensors_never_fetches_the_pickle(fake_hub, tiny_model):
    import shutil
    from pathlib import Path

    from pretrain.models.resolve import resolve_model

    repos, calls = fake_hub
    repo = repos / "google/electra-small-discriminator"
    shutil.copytree(tiny_model, repo)
    (repo / "pytorch_model.bin").write_bytes(b"never read")
    folder = Path(resolve_model("electra-small"))
    assert calls == [["*.json", "*.txt", "*.model", "*.safetensors"]]
    assert (folder / "model.safetensors").is_file() and not (folder / "pytorch_model.bin").exists()


def test_hub_snapshot_without_weights_is_one_line(fake_hub, tiny_model, tmp_path, capsys):
    import shutil

    repos, calls = fake_hub
    repo = repos / "google/electra-small-discriminator"
    shutil.copytree(tiny_model, repo)
    (repo / "model.safetensors").unlink()
    code, _, err = run_cli(["run", "glue", "--model", "electra-small", "--tasks", "rte", "--data-dir",
                        str(tmp_path)], capsys)
    snapshot = tmp_path / "cache" / "google/electra-small-discriminator"
    assert code == 2 and err == (
        f"harness: error: the Hub snapshot of 'google/electra-small-discriminator' (in {str(snapshot)!r}) has "
        "no weights (model.safetensors or pytorch_model.bin); connect once so they download, or pass a local "
        "checkpoint directory as --model\n")


@pytest.mark.parametrize("text, reason", [
    ('{"model_type": "electra",', "is not valid JSON (Expecting property name enclosed in double quotes: "
                                  "line 1 column 26 (char 25))"),
    ('{"model_type": "electra", "hidden_size": "big"}', "is not a usable model config (Validation error for "
                                                         "field 'hidden_size': TypeError: Field 'hidden_size' "
                                                         "expected int, got str (value: 'big'))")])
def test_broken_config_json_is_named_not_the_tokenizer(text, reason, glue_data, tmp_path, capsys):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(write_tiny_model(tmp_path / "original"), model)
    (model / "config.json").write_text(text)
    capsys.readouterr()
    code, _, err = run_cli(glue_args(model, glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err == (f"harness: error: {str(model / 'config.json')!r} {reason}; restore it or "
                                 "save the model again with save_pretrained()\n")


def test_hub_name_offline_says_what_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    code, _, err = run_cli(["run", "glue", "--model", "electra-small", "--tasks", "rte", "--data-dir",
                        str(tmp_path)], capsys)
    assert code == 2
    assert "'google/electra-small-discriminator' is not a local directory and could not be had" in err
    assert "pass a local checkpoint directory" in err and err.count("\n") == 1
