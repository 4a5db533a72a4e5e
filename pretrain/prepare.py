"""Everything a run needs before its first step: tokenizer, packed examples, networks, optimiser."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from foundation.infra.atomic import atomic_dir
from foundation.models.presets import PRESETS
from foundation.models.pretrain_meta import BudgetChange, Parameters, PretrainMeta
from foundation.models.shapes import TransformerShape
from foundation.training import console, optimization, placement
from foundation.training import distributed as dist
from pretrain.budget import schedule_fraction, stopped_by
from pretrain.checkpoint import export_models
from pretrain.config import PretrainConfig
from pretrain.corpus import tokenized_paragraphs
from pretrain.networks import (
    build_networks,
    distinct_params,
    export_discriminator,
    export_main_mlm,
    network_config,
    network_shapes,
)
from pretrain.objective_model import MAIN_MLM, PretrainingModel
from pretrain.objectives import MaskingSettings
from pretrain.packing import packed_examples
from pretrain.vocab import load_tokenizer, tokenizer_fingerprint

# The discriminator's transformer layers and detection head: what `disc_layers_lr_scale` slows (its
# embeddings are the generator's too, under either network's name).
DISCRIMINATOR_LAYERS = ("discriminator.electra.encoder.", "discriminator.discriminator_predictions.")


def prepare_examples(config: PretrainConfig, context: dist.Context, files: list[Path]):
    """(tokenizer, packed examples) of the corpus `files`; rank 0 builds the caches while the others
    wait, then reuse them."""
    if context.is_main:
        result = _prepare(config, files)
    dist.barrier(context)
    if not context.is_main:
        result = _prepare(config, files)
    count = len(result[1])
    if context.is_main and count < config.batch_size:  # every batch holds the same few sequences
        console.line(f"note: the corpus gives {count} sequence{'s' if count != 1 else ''} of up to "
                     f"{config.seq_len} tokens, fewer than a batch ({config.batch_size}): every step "
                     "trains on the same text repeated; pass a larger corpus for a meaningful run")
    return result


def _prepare(config: PretrainConfig, files: list[Path]):
    cache = Path(config.cache_dir)
    tokenizer = load_tokenizer(config.tokenizer, files, cache, config.train_vocab_size)
    key = tokenizer_fingerprint(tokenizer)
    tokenizer_dir = cache / "tokenizers" / key
    if not (tokenizer_dir / "tokenizer_config.json").is_file():
        with atomic_dir(tokenizer_dir) as tmp:
            tokenizer.save_pretrained(tmp)
    paragraphs = tokenized_paragraphs(files, tokenizer_dir, key, cache)
    examples = packed_examples(paragraphs, config.seq_len, config.seed, tokenizer.cls_token_id,
                               tokenizer.sep_token_id, cache)
    return tokenizer, examples


@dataclass
class TrainingSetup:
    """The model, optimiser and fixed facts of a run."""

    config: PretrainConfig
    model: PretrainingModel
    optimizer: torch.optim.Optimizer
    tokenizer: object
    discriminator_shape: TransformerShape
    generator_shape: TransformerShape | None
    device: torch.device
    precision: str
    attention: str
    compiled: bool  # the step runs through torch.compile
    # fp16's loss scaling, a pass-through otherwise (placement.grad_scaler); checkpointed (train._save)
    scaler: torch.amp.GradScaler | None = None
    extended: list[BudgetChange] = field(default_factory=list)  # budget changes resumed with (checkpoint)
    corpus: dict = field(default_factory=dict)  # the corpus's provenance (corpus_source.CorpusSource)

    def __post_init__(self):
        if self.scaler is None:
            self.scaler = placement.grad_scaler(self.device, self.precision)

    def autocast(self):
        return placement.autocast(self.device, self.precision)

    def export(self, folder: Path) -> None:
        """discriminator/ and generator/ (for `mlm`: the main model with its MLM head) in `folder`."""
        model = self.model
        # Building the export copies draws random initial weights: keep that off the run's RNG, or
        # a resumed run (whose RNG was saved before the export) would diverge from an unbroken one.
        with torch.random.fork_rng(devices=[]):
            generator = export_main_mlm(model.discriminator, model.main_head) if model.generator is None \
                else model.generator
            export_models(folder, export_discriminator(model.discriminator), generator, self.tokenizer)

    def meta(self, counters, metrics: dict, world_size: int) -> PretrainMeta:
        """pretrain_meta.json (foundation/models/pretrain_meta.py): what reports and a reader need to know."""
        model, config = self.model, self.config
        return PretrainMeta(
            objective=config.objective, preset=config.preset,
            embedding_sharing=config.embedding_sharing if model.generator is not None else None,
            generator_fraction=config.generator_fraction if model.generator is not None else None,
            discriminator_shape=asdict(self.discriminator_shape),
            generator_shape=asdict(self.generator_shape) if self.generator_shape else None,
            parameters=Parameters(discriminator=distinct_params(model.discriminator),
                                  generator=distinct_params(model.generator), total=distinct_params(model)),
            steps=counters.step, tokens_seen=counters.tokens, train_flops=counters.flops,
            wall_time_s=counters.elapsed_s, stage=counters.stage,
            batch_size=config.batch_size, seq_len=config.seq_len, world_size=world_size,
            precision=self.precision, attention=self.attention, device=self.device.type,
            compiled=self.compiled,
            # Heads the objective never trained: fine-tuning replaces the discriminator head anyway.
            discriminator_head_trained=config.objective in ("electra", "electra-15", "two-stage",
                                                            "all-tokens-mlm"),
            metrics=metrics, config=asdict(config), extended=self.extended, corpus=self.corpus,
            # Which budget ended the run (None in a mid-run checkpoint), and how far the schedule got:
            # below 1 when max_time_s cut a steps, tokens or FLOPs budget short (rate not decayed to 0).
            stopped_by=stopped_by(config, counters),
            schedule_completed=min(1.0, schedule_fraction(config, counters)),
        )


def build_setup(config: PretrainConfig, context: dist.Context, tokenizer) -> TrainingSetup:
    """Networks (identically initialised in every process), the objective and the optimiser."""
    preset = PRESETS[config.preset]
    device = context.device
    fraction = config.generator_fraction if config.has_generator else None
    disc_shape, gen_shape = network_shapes(preset, len(tokenizer), fraction)
    precision = placement.resolve_precision(config.precision, device)
    attention = placement.resolve_attention(config.attention, device, precision)
    pad_id = tokenizer.pad_token_id
    disc_config = network_config(disc_shape, preset.max_position_embeddings, pad_id, attention)
    gen_config = network_config(gen_shape, preset.max_position_embeddings, pad_id, attention) \
        if gen_shape else None
    torch.manual_seed(config.seed)
    discriminator, generator, head = build_networks(disc_config, gen_config, config.embedding_sharing,
                                                    config.objective in MAIN_MLM)
    if config.disc_bias_prior is not None:
        with torch.no_grad():
            discriminator.discriminator_predictions.dense_prediction.bias.fill_(
                math.log(config.disc_bias_prior / (1 - config.disc_bias_prior)))
    masking = MaskingSettings(
        mask_id=tokenizer.mask_token_id, vocab_size=len(tokenizer),
        special_ids=(tokenizer.cls_token_id, tokenizer.sep_token_id, pad_id, tokenizer.mask_token_id),
        mask_prob=config.mask_prob, mask_token_fraction=config.mask_token_fraction,
        random_token_fraction=config.random_token_fraction)
    model = PretrainingModel(discriminator, generator, head, config.objective, masking,
                             config.disc_weight, config.temperature).to(device)
    model.train()
    torch.manual_seed(config.seed + 7919 * (context.rank + 1))  # masking and dropout differ per process
    return TrainingSetup(config, model, make_optimizer(model, config, device), tokenizer, disc_shape,
                         gen_shape, device, precision, attention,
                         placement.resolve_compile(config.compile, device))


def make_optimizer(model: torch.nn.Module, config: PretrainConfig, device: torch.device):
    """ElectraAdam (its update compiled with `compile_optimizer`) or AdamW (fused where torch supports it),
    by the training kit's grouping rule (foundation/training/optimization.py): weight decay except on
    biases and norms.

    Each group carries `lr_scale`, which the loop multiplies into the scheduled rate:
    `disc_layers_lr_scale` for the discriminator's own layers and head (depth 1), 1 for the rest. At the
    default scale there are two groups, as before the setting, so older checkpoints resume."""
    split = config.disc_layers_lr_scale != 1
    groups = optimization.parameter_groups(
        model, config.weight_decay, lambda name: int(split and name.startswith(DISCRIMINATOR_LAYERS)),
        lambda depth: config.disc_layers_lr_scale if depth else 1.0, decaying_first=True)
    return optimization.build_optimizer(groups, config.optimizer, config.learning_rate, config.adam_epsilon,
                                        fused=device.type in ("cpu", "cuda"),
                                        compiled=config.compile_optimizer)
