"""The project's one FLOPs count, in the ELECTRA paper's convention, plus two cross-checks.

Paper convention (Clark et al. 2020, google-research/electra `flops_computation.py`), reproduced
term for term so our figures line up with Table 1:
  - An operation is a mathematical operation, not a machine instruction: an exp costs as much as
    an add. Matrix multiplies dominate, so the per-element constants below barely move totals.
  - A dense (m x n) matmul costs 2·m·n FLOPs per token (multiply and add counted separately).
  - Embedding lookups are counted as dense one-hot matmuls (2·embedding_size·vocab_size per token);
    on TPUs the dense form is what actually runs.
  - Training costs 2x the forward pass: the script assumes backward == forward. A matmul's backward
    really costs 2x its forward (input and weight gradients), so these figures are ~2/3 of the
    common 3x-forward rule (and of 6·N·tokens); we keep 2x because Table 1 and the pinned numbers
    use it. Fine-tuning uses the same factor so the two stay comparable.
  - Pre-training ELECTRA costs the discriminator (binary per-token head) plus the generator (MLM
    head over the masked fraction of positions); BERT costs one model with the MLM head.
  - The classification head is charged at every position, as in the script, not only at [CLS].
  - The post-attention LayerNorm costs a flat 5 FLOPs per token, not 5 per element: a slip in the
    script (its other LayerNorms are per element) kept so we match its outputs exactly.

Cross-checks: `six_n_flops` is transformers' Trainer convention (6 · non-embedding params · tokens),
and `measured_forward_flops` runs torch's FlopCounterMode on a real forward pass, which counts
matmuls and attention only (no embedding lookups, no element-wise ops, no head on a bare encoder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pretrain.errors import UserError
from pretrain.models import ModelPreset

# Per-element constants from the official script. Dropout: random number, compare, mask, rescale.
DROPOUT_FLOPS = 4
# LayerNorm: mean (sum), variance (square and sum), bias add, scale multiply.
LAYER_NORM_FLOPS = 5
# GELU: 0.5 · x · (1 + tanh(sqrt(2/pi) · (x + 0.044715 · x^3))).
ACTIVATION_FLOPS = 8
# Softmax: max-subtract, exp, sum, divide.
SOFTMAX_FLOPS = 5
# Training = forward + backward, with backward costed as one more forward (see module docstring).
TRAIN_TO_FORWARD_RATIO = 2
# Share of positions that reach the MLM output softmax: the script's 20 predictions per 128 tokens.
MLM_OUTPUT_FRACTION = 0.15625
# Token-type vocabulary (segments A and B), looked up densely alongside the positions.
TYPE_VOCAB_SIZE = 2

HEADS = ("classification", "mlm", "none")


@dataclass(frozen=True)
class TransformerShape:
    """The dimensions a FLOPs or parameter count needs; sequence length is passed separately."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    embedding_size: int
    vocab_size: int = 30522

    def __post_init__(self):
        bad = [f"{name}={value!r}" for name, value in vars(self).items()
               if not isinstance(value, int) or value < 1]
        if bad:
            raise UserError(f"transformer shape needs positive integer sizes, got {', '.join(bad)}")


def shape_of(model) -> TransformerShape:
    """Shape of a ModelPreset, a transformers config (Electra/Bert), a config.json dict, or a shape."""
    if isinstance(model, TransformerShape):
        return model
    if isinstance(model, ModelPreset):
        return TransformerShape(model.hidden_size, model.num_layers, model.num_heads,
                                model.intermediate_size, model.embedding_size, model.vocab_size)
    config = model.to_dict() if hasattr(model, "to_dict") else model
    if not isinstance(config, Mapping):
        raise UserError(f"cannot read a transformer shape from {type(model).__name__}; pass a model "
                        "preset, a transformers config or a config.json dict")
    needed = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [key for key in needed if key not in config]
    if missing:
        raise UserError(f"model config lacks {', '.join(missing)}; pass a BERT or ELECTRA config.json")
    hidden_size = config["hidden_size"]
    # BERT has no factorized embeddings: its embedding width is the hidden width.
    embedding_size = config.get("embedding_size") or hidden_size
    return TransformerShape(hidden_size, config["num_hidden_layers"], config["num_attention_heads"],
                            config["intermediate_size"], embedding_size, config["vocab_size"])


def generator_shape(shape: TransformerShape, fraction: float) -> TransformerShape:
    """ELECTRA's generator: width, feed-forward and heads scaled by `fraction`, embeddings tied.

    For the paper's shapes this equals the official `get_generator_config` (4·hidden feed-forward,
    hidden // 64 heads); tied embeddings keep the discriminator's embedding width.
    """
    if not 0 < fraction <= 1:
        raise UserError(f"generator fraction {fraction!r} must be in (0, 1]; the paper uses 1/4 to 1/2")
    shape = shape_of(shape)
    return replace(shape, hidden_size=max(1, round(shape.hidden_size * fraction)),
                   intermediate_size=max(1, round(shape.intermediate_size * fraction)),
                   num_heads=max(1, round(shape.num_heads * fraction)))


def _block_flops_per_token(shape: TransformerShape, seq_len: int) -> float:
    hidden, heads, ff = shape.hidden_size, shape.num_heads, shape.intermediate_size
    attention = (2 * 3 * hidden * hidden + 3 * hidden  # query/key/value projections and biases
                 + 2 * hidden * seq_len  # scores q·k for every other position
                 + (SOFTMAX_FLOPS + DROPOUT_FLOPS + 1) * seq_len * heads  # softmax, dropout, 1/sqrt(d)
                 + 2 * hidden * seq_len  # probabilities times values
                 + 2 * hidden * hidden + hidden  # output projection and bias
                 + (DROPOUT_FLOPS + 1) * hidden + LAYER_NORM_FLOPS)  # dropout, residual, LayerNorm
    feed_forward = (2 * hidden * ff + ff + ACTIVATION_FLOPS * ff  # up-projection, bias, GELU
                    + 2 * hidden * ff + hidden  # down-projection and bias
                    + (DROPOUT_FLOPS + 1 + LAYER_NORM_FLOPS) * hidden)  # dropout, residual, LayerNorm
    return attention + feed_forward


def _embedding_flops_per_token(shape: TransformerShape, seq_len: int) -> float:
    embedding = shape.embedding_size
    flops = (2 * embedding * shape.vocab_size  # one-hot word lookup
             + 2 * embedding * (seq_len + TYPE_VOCAB_SIZE)  # one-hot position and token-type lookups
             + 2 * embedding  # add the three embeddings
             + (LAYER_NORM_FLOPS + DROPOUT_FLOPS) * embedding)
    if embedding != shape.hidden_size:  # projection up to the hidden width
        flops += 2 * shape.hidden_size * embedding + shape.hidden_size
    return flops


def _mlm_head_flops_per_token(shape: TransformerShape) -> float:
    embedding, vocab = shape.embedding_size, shape.vocab_size
    per_prediction = (2 * shape.hidden_size * embedding + embedding  # dense back to embedding width
                      + (ACTIVATION_FLOPS + LAYER_NORM_FLOPS) * embedding
                      + 2 * embedding * vocab  # tied output embedding
                      + SOFTMAX_FLOPS * vocab + 2 * vocab)  # softmax and target-word pick
    return MLM_OUTPUT_FRACTION * per_prediction


def _classification_head_flops_per_token(shape: TransformerShape) -> float:
    hidden = shape.hidden_size
    return 2 * hidden * hidden + hidden + ACTIVATION_FLOPS * hidden + 2 * hidden


def _forward_flops_per_token(shape: TransformerShape, seq_len: int, head: str) -> float:
    if head not in HEADS:
        raise UserError(f"unknown head {head!r}; choose one of {', '.join(HEADS)}")
    head_flops = {"classification": _classification_head_flops_per_token,
                  "mlm": _mlm_head_flops_per_token, "none": lambda _: 0.0}[head](shape)
    return (shape.num_layers * _block_flops_per_token(shape, seq_len)
            + _embedding_flops_per_token(shape, seq_len) + head_flops)


def inference_flops(shape, seq_len: int = 128, head: str = "classification") -> float:
    """Forward FLOPs for one example of `seq_len` tokens, paper convention (Table 1 uses s=128)."""
    return float(seq_len * _forward_flops_per_token(shape_of(shape), seq_len, head))


def train_step_flops(discriminator, generator: TransformerShape | None, batch_size: int,
                     seq_len: int) -> float:
    """One pre-training step; `generator=None` means BERT's MLM objective on the main model."""
    if generator is None:
        forward = _forward_flops_per_token(shape_of(discriminator), seq_len, "mlm")
    else:
        forward = (_forward_flops_per_token(shape_of(discriminator), seq_len, "classification")
                   + _forward_flops_per_token(shape_of(generator), seq_len, "mlm"))
    return float(TRAIN_TO_FORWARD_RATIO * batch_size * seq_len * forward)


def pretrain_flops(discriminator, generator: TransformerShape | None, num_train_steps: int,
                   batch_size: int, seq_len: int) -> float:
    """Whole pre-training run, paper convention (Table 1's train FLOPs)."""
    return num_train_steps * train_step_flops(discriminator, generator, batch_size, seq_len)


def finetune_flops(shape, num_examples: int, seq_len: int, num_epochs: float = 1.0,
                   head: str = "classification") -> float:
    """Fine-tuning on `num_examples` padded to `seq_len` for `num_epochs`, paper convention."""
    return TRAIN_TO_FORWARD_RATIO * num_epochs * num_examples * inference_flops(shape, seq_len, head)


def six_n_flops(num_non_embedding_params: int, num_tokens: int) -> float:
    """transformers Trainer's training estimate: 6 · non-embedding params · tokens."""
    return float(6 * num_non_embedding_params * num_tokens)


def count_non_embedding_params(shape) -> int:
    """Parameters outside embedding tables: what ElectraModel.num_parameters(exclude_embeddings=True) gives.

    Covers the encoder, the embedding LayerNorm and the embedding projection; no pooler or head.
    """
    shape = shape_of(shape)
    hidden, ff, embedding = shape.hidden_size, shape.intermediate_size, shape.embedding_size
    per_layer = (4 * (hidden * hidden + hidden)  # query, key, value, attention output
                 + (hidden * ff + ff) + (ff * hidden + hidden)  # feed-forward up and down
                 + 2 * 2 * hidden)  # two LayerNorms
    embedding_extras = 2 * embedding  # LayerNorm
    if embedding != hidden:
        embedding_extras += embedding * hidden + hidden
    return shape.num_layers * per_layer + embedding_extras


def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    # Scores (q·k) and weighted values: two batched matmuls over (batch, heads, query, key).
    batch, heads, query_len, head_size = query_shape
    key_len, value_size = key_shape[-2], value_shape[-1]
    return 2 * batch * heads * query_len * key_len * (head_size + value_size)


def measured_forward_flops(model, seq_len: int = 128, batch_size: int = 1) -> float:
    """FLOPs torch's FlopCounterMode counts in one forward pass on random ids, per example."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    # torch counts the GPU attention kernels but not the CPU one, which would drop the q·k and
    # probability·value matmuls from CPU measurements; count it with torch's own sdpa formula.
    cpu_attention = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention_flops}
    device = next(model.parameters()).device
    input_ids = torch.randint(0, model.config.vocab_size, (batch_size, seq_len), device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=cpu_attention) as counter:
            model(input_ids=input_ids)
    finally:
        model.train(was_training)
    return counter.get_total_flops() / batch_size
