"""Generator and discriminator construction, embedding sharing, and their export as plain
`transformers` models (ElectraForPreTraining, ElectraForMaskedLM).

Sharing modes (the embedding group is word, position and token-type embeddings plus the
embedding LayerNorm, i.e. one `ElectraEmbeddings` module):
  shared  one module used by both networks (the paper's default); the generator projects the
          embedding width to its own hidden size.
  untied  separate embeddings of the same width.
  tied    every weight shared: the generator is the discriminator's encoder with an MLM head
          (the paper's "same size, tie all weights" variant).
  gdes    DeBERTaV3's gradient-disentangled sharing: the discriminator's embeddings are
          stop_gradient(generator's) + a zero-initialised delta, so the discriminator loss
          never moves the generator's embeddings. The export adds the delta in.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn
from torch.func import functional_call
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from transformers.models.electra.modeling_electra import ElectraGeneratorPredictions

from foundation.models.presets import electra_config
from foundation.models.shapes import TransformerShape, generator_shape, shape_of

EMBEDDINGS = "electra.embeddings."


def network_config(shape: TransformerShape, max_positions: int, pad_id: int, attention: str) -> ElectraConfig:
    """The ElectraConfig a pre-training network of this shape is built from, attention as resolved."""
    config = electra_config(shape, max_positions, pad_token_id=pad_id)
    config._attn_implementation = attention
    return config


def network_shapes(preset, vocab_size: int, fraction: float | None):
    """(discriminator shape, generator shape or None) with the tokenizer's vocabulary size."""
    shape = replace(shape_of(preset), vocab_size=vocab_size)
    return shape, (generator_shape(shape, fraction) if fraction else None)


class GDESEmbeddings(nn.Module):
    """Discriminator embeddings = stop_gradient(generator embeddings) + delta (DeBERTaV3)."""

    def __init__(self, source: nn.Module):
        super().__init__()
        self._source = [source]  # a list, so the generator's module is not registered twice
        self.delta = nn.ParameterDict({name.replace(".", "__"): nn.Parameter(torch.zeros_like(p))
                                       for name, p in source.named_parameters()})

    def merged(self) -> dict[str, torch.Tensor]:
        """The effective parameters, under the generator's names."""
        source = dict(self._source[0].named_parameters())
        return {name: source[name].detach() + self.delta[name.replace(".", "__")] for name in source}

    def forward(self, **inputs):
        return functional_call(self._source[0], self.merged(), args=(), kwargs=inputs)


class MLMHead(nn.Module):
    """ELECTRA's MLM head (dense to embedding width, GELU, LayerNorm, tied output) for the main model."""

    def __init__(self, config: ElectraConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.generator_predictions = ElectraGeneratorPredictions(config)
        self.generator_lm_head = nn.Linear(config.embedding_size, config.vocab_size)
        self.generator_lm_head.weight = word_embeddings.weight
        nn.init.normal_(self.generator_predictions.dense.weight, std=config.initializer_range)
        nn.init.zeros_(self.generator_predictions.dense.bias)
        nn.init.zeros_(self.generator_lm_head.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.generator_lm_head(self.generator_predictions(hidden))


def build_networks(discriminator_config: ElectraConfig, generator_config: ElectraConfig | None,
                   sharing: str, main_mlm_head: bool):
    """(discriminator, generator or None, main-model MLM head or None), weights shared as asked."""
    discriminator = ElectraForPreTraining(discriminator_config)
    disc_embeddings = discriminator.electra.embeddings
    head = MLMHead(discriminator_config, disc_embeddings.word_embeddings) if main_mlm_head else None
    if generator_config is None:
        return discriminator, None, head
    generator = ElectraForMaskedLM(generator_config)
    if sharing == "shared":
        generator.electra.embeddings = disc_embeddings
    elif sharing == "tied":
        generator.electra = discriminator.electra
    elif sharing == "gdes":
        discriminator.electra.embeddings = GDESEmbeddings(generator.electra.embeddings)
    generator.generator_lm_head.weight = generator.electra.embeddings.word_embeddings.weight
    if head is not None and sharing == "gdes":
        head.generator_lm_head.weight = generator.electra.embeddings.word_embeddings.weight
    return discriminator, generator, head


def discriminator_state(discriminator: ElectraForPreTraining) -> dict[str, torch.Tensor]:
    """The discriminator's weights under ElectraForPreTraining's names (GDES delta merged)."""
    embeddings = discriminator.electra.embeddings
    if not isinstance(embeddings, GDESEmbeddings):
        return discriminator.state_dict()
    state = {k: v for k, v in discriminator.state_dict().items() if not k.startswith(EMBEDDINGS)}
    state.update({EMBEDDINGS + k: v for k, v in embeddings.merged().items()})
    return state


def export_discriminator(discriminator: ElectraForPreTraining) -> ElectraForPreTraining:
    """A standalone ElectraForPreTraining holding a copy of the discriminator's weights."""
    exported = ElectraForPreTraining(discriminator.config)
    exported.load_state_dict(discriminator_state(discriminator))
    return exported


def export_main_mlm(discriminator: ElectraForPreTraining, head: MLMHead) -> ElectraForMaskedLM:
    """The main model with its MLM head as an ElectraForMaskedLM (the `mlm` objective's generator/)."""
    exported = ElectraForMaskedLM(discriminator.config)
    state = {k: v for k, v in discriminator_state(discriminator).items() if k.startswith("electra.")}
    state.update({k: v for k, v in head.state_dict().items()})
    exported.load_state_dict(state)
    return exported


def distinct_params(*modules: nn.Module | None) -> int:
    """Distinct parameters across modules (a shared tensor counts once)."""
    seen: dict[int, int] = {}
    for module in modules:
        if module is not None:
            for p in module.parameters():
                seen[id(p)] = p.numel()
    return sum(seen.values())
