"""The project's one FLOPs count, in the ELECTRA paper's convention.

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

Cross-check: `six_n_flops` is transformers' Trainer convention (6 · non-embedding params · tokens);
reports/flop_counts.py adds a measured count (torch's FlopCounterMode on a real forward pass).

Model identity (CONTRIBUTING.md): the budget that stops pre-training and the
reports that print costs use these same formulas. Torch-free.
"""

from __future__ import annotations

from foundation.infra.errors import UserError
from foundation.models.shapes import TransformerShape, shape_of

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


def non_embedding_params(shape) -> int:
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
