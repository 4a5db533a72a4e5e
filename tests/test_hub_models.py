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

    from foundation.models.resolve import resolve_model
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

    from foundation.models.resolve import resolve_model

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


COMMIT = "ab" * 20


def test_top_level_files_only():
    from foundation.models.hub import top_level_files

    files = ["config.json", "vocab.txt", "model.safetensors", "modeling_my.py", "a[1].json", "README.md",
             "onnx/model.safetensors", "sub/config.json", "sub/deeper/vocab.txt", "sub/modeling_my.py"]
    assert top_level_files(files, ["*.json", "*.txt", "*.model", "*.safetensors"]) == \
        ["config.json", "vocab.txt", "model.safetensors", "a[[]1].json"]
    assert top_level_files(files, ["*.py"]) == ["modeling_my.py"]


def test_an_online_snapshot_takes_no_sub_folder_files(tmp_path, tiny_model, monkeypatch):
    """Online, snapshot_download is given the repo's top-level files by name: huggingface_hub's own
    filter (where '*' matches '/') then downloads no sub-folder's weights, configs or code."""
    import shutil

    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.utils import filter_repo_objects

    from foundation.models.hub import hub_checkpoint

    repo = tmp_path / "repo"
    shutil.copytree(tiny_model, repo)
    for sub in ("onnx", "other/deeper"):
        (repo / sub).mkdir(parents=True)
        shutil.copy(repo / "model.safetensors", repo / sub / "model.safetensors")
        (repo / sub / "config.json").write_text("{}")
        (repo / sub / "modeling_x.py").write_text("raise SystemExit('ran')\n")
    (repo / "modeling_x.py").write_text("raise SystemExit('ran')\n")
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())

    def snapshot_download(repo_id, revision=None, allow_patterns=None):
        snapshot = tmp_path / "cache" / (revision or "main")
        for name in filter_repo_objects(files, allow_patterns=allow_patterns):  # the Hub's own filter
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(repo / name, snapshot / name)
        return str(snapshot)

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda repo_id, revision=None: files)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    for revision, code in ((None, False), (COMMIT, True)):
        folder = hub_checkpoint("someone/tiny", revision, code=code)
        got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        assert got and all("/" not in name for name in got), got
        assert ("modeling_x.py" in got) == code and "model.safetensors" in got


@pytest.fixture
def offline_cache(tmp_path, tiny_model, monkeypatch):
    """A hub-layout cache holding someone/custom at COMMIT (ref main), read offline in this process."""
    from huggingface_hub import constants

    from tests.families import write_hub_cache

    cache = tmp_path / "hub-cache"
    write_hub_cache(cache, "someone/custom", tiny_model, commit=COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_remote_code_needs_a_pinned_commit(offline_cache):
    from foundation.infra.errors import UserError
    from foundation.models.resolve import resolve_model

    with pytest.raises(UserError) as raised:
        resolve_model("someone/custom", trust_remote_code=True)
    assert str(raised.value) == ("trust_remote_code=true runs code from the Hub repo 'someone/custom', but no "
                                 "revision is pinned; pass --model someone/custom@<commit> (the 40-hex commit "
                                 "id of the code you have read)")
    with pytest.raises(UserError, match=r"but 'main' is a branch or tag, which can move; pass --model "
                                        r"someone/custom@<commit>"):
        resolve_model("someone/custom@main", trust_remote_code=True)
    with pytest.raises(UserError, match="Hub repo 'google/electra-small-discriminator', but no revision"):
        resolve_model("electra-small", trust_remote_code=True)  # a preset's released id, unpinned
    snapshot = offline_cache / "models--someone--custom" / "snapshots" / COMMIT
    assert resolve_model(f"someone/custom@{COMMIT}", trust_remote_code=True) == str(snapshot)
    assert resolve_model("someone/custom") == str(snapshot)  # no code: no pin needed


def test_unpinned_remote_code_is_one_line_from_the_cli(offline_cache, glue_data, tmp_path, capsys):
    args = glue_args("someone/custom", glue_data, tmp_path, "--tasks", "rte", "trust_remote_code=true")
    code, _, err = run_cli(args, capsys)
    assert code == 2 and err.count("\n") == 1 and "pass --model someone/custom@<commit>" in err, err
    assert not (tmp_path / "out").exists()
