"""Weights in a pickle (pytorch_model.bin) load only as plain tensors: one that would run code is refused,
in one line from `harness run`, and the code never runs."""

import pytest

from pretrain.infra.errors import UserError
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
