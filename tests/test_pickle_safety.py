"""Weights in a pickle (pytorch_model.bin) load only as plain tensors: one that would run code is refused,
in one line from `harness run`, and the code never runs."""

import pytest

from foundation.infra.errors import UserError
from tests.conftest import glue_args, run_cli, write_tiny_model


def write_pickle_bomb_model(directory, marker):
    """A tiny checkpoint whose pytorch_model.bin would run `touch marker` if unpickled unsafely."""
    import os

    import torch
    from safetensors.torch import load_file

    write_tiny_model(directory)
    weights = load_file(directory / "model.safetensors")
    (directory / "model.safetensors").unlink()

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    torch.save({**weights, "payload": Payload()}, directory / "pytorch_model.bin")
    return directory


def test_unsafe_pickle_weights_are_refused_with_the_reason(tmp_path):
    import transformers

    from tasks.loading import from_pretrained_quietly

    model = write_pickle_bomb_model(tmp_path / "bomb", tmp_path / "ran")
    with pytest.raises(UserError, match=r"not a plain tensor pickle \(it would call posix.system\)"):
        from_pretrained_quietly(transformers.ElectraForSequenceClassification, model)
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow
def test_run_refuses_unsafe_pickle_weights_in_one_line(glue_data, tmp_path, capsys):
    model = write_pickle_bomb_model(tmp_path / "bomb", tmp_path / "ran")
    capsys.readouterr()
    code, _, err = run_cli(glue_args(model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1"), capsys)
    assert code == 2 and "Traceback" not in err and err.strip().splitlines()[-1] == (
        f"harness: error: refused to load the pytorch_model.bin weights in {str(model)!r}: the file is not a "
        "plain tensor pickle (it would call posix.system), and unpickling anything else can run code; get "
        "model.safetensors from a source you trust, or convert a copy you trust with save_pretrained()")
    assert not (tmp_path / "ran").exists()


def _floor(package: str):
    """pyproject.toml's requirement on `package`, as a SpecifierSet."""
    import tomllib

    from packaging.requirements import Requirement

    from tests.conftest import REPO

    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    found = [Requirement(line) for line in dependencies if Requirement(line).name == package]
    assert len(found) == 1, dependencies
    return found[0].specifier


@pytest.mark.parametrize(("package", "refused", "allowed"), [
    # torch.load(weights_only=True) runs a pickle's code before 2.6 (CVE-2025-32434)
    ("torch", ["2.4.0", "2.5.1", "2.6.0rc1"], ["2.6.0", "2.11.0", "2.13.0"]),
    # transformers refuses .bin on such a torch from 4.50; the loaders' known CVEs are fixed by 4.53;
    # the GPU image has 5.17
    ("transformers", ["4.45.0", "4.49.0", "4.52.4"], ["4.53.0", "5.17.0", "5.24.0"]),
])
def test_dependency_floors_exclude_unsafe_versions(package, refused, allowed):
    specifier = _floor(package)
    assert not [v for v in refused if specifier.contains(v, prereleases=True)], specifier
    assert all(specifier.contains(v, prereleases=True) for v in allowed), specifier
