"""FLOPs counts pinned to the official flops_computation.py outputs, plus the two cross-checks and the CLI."""

import pytest
import torch
from transformers import BertConfig, ElectraConfig, ElectraModel

from foundation.infra.errors import UserError
from foundation.models.flops import (
    finetune_flops,
    inference_flops,
    non_embedding_params,
    pretrain_flops,
    six_n_flops,
)
from foundation.models.presets import PRESETS
from foundation.models.shapes import TransformerShape, generator_shape, shape_of
from harness.cli import main
from reports.flop_counts import measured_forward_flops

ELECTRA_SMALL = shape_of(PRESETS["electra-small"])
ELECTRA_BASE = shape_of(PRESETS["electra-base"])
BERT_BASE = shape_of(PRESETS["bert-base"])
TINY = TransformerShape(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128, embedding_size=32,
                        vocab_size=1000)


def _tiny_config(shape=TINY, **extra):
    return ElectraConfig(vocab_size=shape.vocab_size, embedding_size=shape.embedding_size,
                         hidden_size=shape.hidden_size, num_hidden_layers=shape.num_layers,
                         num_attention_heads=shape.num_heads, intermediate_size=shape.intermediate_size,
                         max_position_embeddings=128, **extra)


def _matmul_flops(shape, seq_len):
    """What FlopCounterMode sees per example: 2·m·n per token for each dense layer and attention matmul."""
    hidden, ff = shape.hidden_size, shape.intermediate_size
    per_layer = 2 * 4 * hidden * hidden + 2 * 2 * hidden * ff + 2 * 2 * hidden * seq_len
    projection = 2 * shape.embedding_size * hidden if shape.embedding_size != hidden else 0
    return seq_len * (shape.num_layers * per_layer + projection)


# The official script's outputs (reference/README.md; paper Table 1 rounds them to two figures).
@pytest.mark.parametrize(("flops", "expected"), [
    (lambda: inference_flops(ELECTRA_SMALL, seq_len=128), 3.677e9),
    (lambda: inference_flops(BERT_BASE, seq_len=128), 2.862e10),
    (lambda: pretrain_flops(BERT_BASE, None, 1_000_000, batch_size=256, seq_len=512), 6.428e19),
    (lambda: pretrain_flops(ELECTRA_SMALL, generator_shape(ELECTRA_SMALL, 1 / 4), 1_000_000, 128, 128),
     1.294e18),
    (lambda: pretrain_flops(ELECTRA_SMALL, generator_shape(ELECTRA_SMALL, 1 / 2), 1_000_000, 128, 128),
     1.424e18),
    # get_electra_train_flops(768, 12, 256, 12, 256, 766000, True) in the script: 6.42454e19.
    (lambda: pretrain_flops(ELECTRA_BASE, generator_shape(ELECTRA_BASE, 1 / 3), 766_000, 256, 512),
     6.425e19),
], ids=["electra-small-infer", "bert-base-infer", "bert-base-train", "electra-small-train-gen64",
        "electra-small-train-gen128", "electra-base-train"])
def test_paper_convention_matches_official_script(flops, expected):
    assert flops() == pytest.approx(expected, rel=1e-3)


def test_counts_every_official_term():
    # Integer output of the official TransformerHparams(256, 12, s=128, e=128).get_infer_flops():
    # any dropped or extra term (even a 5-FLOP LayerNorm) breaks equality.
    assert inference_flops(ELECTRA_SMALL) == 3_677_281_792


def test_generator_shape_matches_official_generator_config():
    assert generator_shape(ELECTRA_SMALL, 0.25) == TransformerShape(64, 12, 1, 256, 128, 30522)
    assert generator_shape(ELECTRA_SMALL, 0.5) == TransformerShape(128, 12, 2, 512, 128, 30522)
    # Tied embeddings keep the discriminator's width, so Base's generator projects 768 -> 256.
    assert generator_shape(ELECTRA_BASE, 1 / 3) == TransformerShape(256, 12, 4, 1024, 768, 30522)


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5])
def test_generator_fraction_out_of_range(fraction):
    with pytest.raises(UserError, match="must be in"):
        generator_shape(ELECTRA_SMALL, fraction)


def test_shape_of_preset_config_and_dict_agree():
    config = _tiny_config(ELECTRA_SMALL)
    assert shape_of(config) == ELECTRA_SMALL
    assert shape_of(config.to_dict()) == ELECTRA_SMALL
    # BERT has no embedding_size: its embeddings are hidden-wide.
    assert shape_of(BertConfig()) == BERT_BASE


def test_shape_of_names_missing_keys():
    with pytest.raises(UserError, match="num_hidden_layers, num_attention_heads"):
        shape_of({"hidden_size": 64, "intermediate_size": 128, "vocab_size": 1000})


def test_non_embedding_params_match_transformers():
    assert non_embedding_params(ELECTRA_SMALL) == 9_510_400
    model = ElectraModel(_tiny_config())
    assert non_embedding_params(TINY) == model.num_parameters(exclude_embeddings=True)


def test_six_n_flops_worked_case():
    # ELECTRA-Small, one 128-token example: 6 * 9,510,400 * 128.
    assert six_n_flops(9_510_400, 128) == 7_303_987_200


def test_finetune_flops_uses_paper_train_ratio():
    # 3 epochs of 1,000 examples at s=128, each forward+backward = 2 forwards (official convention).
    flops = finetune_flops(ELECTRA_SMALL, num_examples=1000, seq_len=128, num_epochs=3)
    assert flops == 2 * 3 * 1000 * 3_677_281_792


def test_measured_forward_counts_matmuls_only():
    torch.manual_seed(0)
    model = ElectraModel(_tiny_config())
    measured = measured_forward_flops(model, seq_len=64, batch_size=2)
    # FlopCounterMode counts dense layers and the two attention matmuls (per example), nothing else.
    assert measured == _matmul_flops(TINY, 64) == 10_747_904
    # The paper count adds the dense one-hot embedding lookups, a per-token classification head and
    # element-wise ops; for this shape they are about a third of the total, so measured is ~0.66x.
    assert 0.5 < measured / inference_flops(TINY, seq_len=64) < 0.8
    assert model.training  # measurement leaves the caller's mode alone


def test_cli_prints_each_convention_for_a_preset(capsys):
    argv = ["flops", "--model", "electra-small", "--train-steps", "1000000", "--batch-size", "128",
            "--no-measure"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "hidden 64, 12 layers, 1 heads" in out  # registry's 1/4 generator
    assert "paper convention (ELECTRA flops_computation.py)                    3.677e+09" in out
    assert "N=9,510,400 (forward third of 6*N*tokens)              2.435e+09" in out
    assert "paper convention (ELECTRA flops_computation.py)                    1.294e+18" in out
    # 6 * (9,510,400 + 608,320 generator params) * 1e6 * 128 * 128.
    assert "6*N*tokens (transformers Trainer), N=10,118,720                    9.947e+17" in out
    assert "measured" not in out


def test_cli_measures_and_reads_pretrain_output_dir(tmp_path, capsys):
    discriminator = TransformerShape(128, 4, 2, 512, 128, 1000)
    generator = TransformerShape(48, 4, 1, 192, 128, 1000)  # no preset fraction gives 48
    _tiny_config(discriminator).save_pretrained(tmp_path / "discriminator")
    _tiny_config(generator).save_pretrained(tmp_path / "generator")
    argv = ["flops", "--model", str(tmp_path), "--seq-len", "32", "--train-steps", "10", "--batch-size", "4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "generator: hidden 48, 4 layers, 1 heads, feed-forward 192" in out
    assert f"{_matmul_flops(discriminator, 32):.4g}" == "5.243e+07"
    assert "measured forward (FlopCounterMode: matmuls and attention only)     5.243e+07" in out
    assert f" {pretrain_flops(discriminator, generator, 10, 4, 32):.4g}\n" in out


def test_cli_unknown_model_lists_presets(capsys):
    assert main(["flops", "--model", "electra-huge"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'electra-huge'" in err and "electra-small, electra-base" in err


def test_cli_needs_steps_and_batch_together(capsys):
    assert main(["flops", "--model", "electra-small", "--train-steps", "100", "--no-measure"]) == 2
    assert "need both --train-steps and --batch-size" in capsys.readouterr().err
