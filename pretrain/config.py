"""`PretrainConfig`: every setting of a pre-training run, frozen, validated all at once.

Fields left as None take the preset's value (or the objective's default) in `resolve()`, so a
saved config always states what the run actually used.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pretrain.common.models import PRESETS
from pretrain.corpus_source import SPEC_PREFIXES

Objective = Literal["electra", "mlm", "electra-15", "replace-mlm", "all-tokens-mlm", "two-stage"]
Sharing = Literal["shared", "untied", "tied", "gdes"]
OBJECTIVES: tuple[str, ...] = Objective.__args__
SHARINGS: tuple[str, ...] = Sharing.__args__

# Objectives without a separate generator network.
NO_GENERATOR = ("mlm",)
# Values of settings added later, for configs saved before them (those runs used these).
LEGACY_DEFAULTS = {"optimizer": "adamw", "disc_layers_lr_scale": 1.0, "disc_bias_prior": None}
# Settings that may change between a run and its resumption: they do not change what is computed.
RESUMABLE_CHANGES = ("output_dir", "log_every_steps", "checkpoint_every_steps", "checkpoint_every_s",
                     "keep_checkpoints", "cache_dir", "device", "compile")
# A run stops at the first of these reached; changing them continues a run (checkpoint.budget_change).
BUDGETS = ("max_steps", "max_tokens", "max_time_s", "max_flops")


@dataclass(frozen=True)
class PretrainConfig:
    """One pre-training run. Budgets stop the run at whichever is reached first."""

    preset: str = "electra-tiny"
    # text files or folders (.txt/.raw, optionally .gz), or glue:TASK,... (the tasks' training inputs,
    # pretrain/corpus_source.py); kept as written, so a resume compares the spec, not a cache file
    corpus: tuple[str, ...] = ()
    output_dir: str = ""
    objective: Objective = "electra"

    # Model
    generator_fraction: float | None = None  # generator width / discriminator width; None: preset's
    embedding_sharing: Sharing | None = None  # None: "shared" ("untied" for two-stage)
    tokenizer: str | None = None  # tokenizer dir or vocab.txt; None: BERT uncased; "train": new WordPiece
    train_vocab_size: int = 30522  # only with tokenizer="train"

    # Objective (paper values)
    mask_prob: float | None = None  # None: the preset's (0.15; 0.25 for electra-large, as ELECTRA's Large)
    mask_token_fraction: float = 0.85  # of masked positions, shown as [MASK]
    random_token_fraction: float = 0.0  # of masked positions, shown as a random token (BERT: 0.1)
    disc_weight: float = 50.0
    temperature: float = 1.0
    two_stage_switch: float = 0.5  # fraction of the budget spent on the generator in two-stage

    # Optimisation; None: preset's
    batch_size: int | None = None  # global batch, split across DDP processes
    seq_len: int | None = None
    learning_rate: float | None = None
    warmup_fraction: float = 0.01  # of the budget; the paper warms up 10k of 1M steps
    # electra: ELECTRA's Adam without bias correction, warmup multiplied into the decay (the official
    # code's); adamw: torch's AdamW, warmup then decay (what runs before this setting used)
    optimizer: Literal["electra", "adamw"] = "electra"
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6
    max_grad_norm: float = 1.0
    # Learning-rate multiplier for the discriminator's transformer layers and detection head, not the
    # embeddings it shares with the generator: a small-budget lever (reports/results/pretrain-levers.md)
    # that slows the layers the detector's plateau collapses while the generator trains the embeddings
    # at full rate (measured at 1e14 FLOPs: they collapse all the same). 1 is the paper's.
    disc_layers_lr_scale: float = 1.0
    # The detection head's starting bias as a replaced-token rate p (the bias is log(p / (1 - p))); None
    # starts it at 0, the paper's. At 0 the head predicts "replaced" half the time against a base rate
    # near mask_prob, and the first steps learn that rate by pushing every position along one
    # direction: every ELECTRA encoder measured at 1e14 FLOPs was collapsed (positions' cosine 0.99+)
    # within 20-50 steps (reports/results/pretrain-levers.md). A small-budget lever, the usual prior
    # initialisation of an imbalanced classifier's bias; measured there: positions stay apart (cosine
    # 0.65 at the end, against 0.95) but SST-2 fine-tunes no better.
    disc_bias_prior: float | None = None

    # Budgets: at least one
    max_steps: int | None = None
    max_tokens: int | None = None
    max_time_s: float | None = None
    max_flops: float | None = None

    # Runtime
    precision: Literal["auto", "bf16", "fp32", "fp16"] = "auto"  # fp16: with a gradient scaler
    attention: Literal["auto", "eager", "sdpa"] = "auto"  # auto: eager on a CPU in bf16, else SDPA
    compile: Literal["auto", "on", "off"] = "auto"  # torch.compile the step; auto: on for CUDA only
    device: str = "auto"
    seed: int = 0
    log_every_steps: int = 10
    checkpoint_every_steps: int = 1000
    checkpoint_every_s: float = 600.0
    keep_checkpoints: int = 2
    cache_dir: str = "runs/cache"

    def __post_init__(self):
        errors = _check(self)
        if errors:
            raise ValueError("; ".join(errors))

    @property
    def has_generator(self) -> bool:
        return self.objective not in NO_GENERATOR


def _check(c: PretrainConfig) -> list[str]:
    errors = []
    if c.preset not in PRESETS:
        errors.append(f"unknown preset {c.preset!r}; choose one of {', '.join(PRESETS)}")
    if c.optimizer not in ("electra", "adamw"):
        errors.append(f"unknown optimizer {c.optimizer!r}; choose electra or adamw")
    if c.objective not in OBJECTIVES:
        errors.append(f"unknown objective {c.objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if c.embedding_sharing is not None and c.embedding_sharing not in SHARINGS:
        errors.append(f"unknown embedding_sharing {c.embedding_sharing!r}; "
                      f"choose one of {', '.join(SHARINGS)}")
    if c.generator_fraction is not None and not 0 < c.generator_fraction <= 1:
        errors.append(f"generator_fraction={c.generator_fraction} must be in (0, 1]")
    if c.embedding_sharing == "tied" and c.generator_fraction not in (None, 1.0):
        errors.append("embedding_sharing=tied shares every weight, so it needs generator_fraction=1")
    if c.objective == "two-stage":
        if c.generator_fraction not in (None, 1.0):
            errors.append("two-stage initialises the discriminator from the generator, so it needs "
                          "generator_fraction=1 (the default for it)")
        if c.embedding_sharing not in (None, "untied"):
            errors.append("two-stage freezes the generator, so it needs embedding_sharing=untied "
                          "(the default for it)")
    for name in ("mask_prob", "mask_token_fraction", "random_token_fraction", "two_stage_switch",
                 "warmup_fraction", "disc_layers_lr_scale"):
        if getattr(c, name) is not None and not 0 <= getattr(c, name) <= 1:
            errors.append(f"{name}={getattr(c, name)} must be between 0 and 1")
    if c.mask_token_fraction + c.random_token_fraction > 1:
        errors.append("mask_token_fraction + random_token_fraction must not exceed 1")
    for name in ("batch_size", "seq_len", "max_steps", "max_tokens", "log_every_steps", "train_vocab_size"):
        value = getattr(c, name)
        if value is not None and value <= 0:
            errors.append(f"{name}={value} must be positive")
    if c.disc_layers_lr_scale != 1 and not c.has_generator:
        errors.append(f"disc_layers_lr_scale scales the discriminator against its generator; "
                      f"--objective {c.objective} has none, so leave it at 1")
    if c.disc_bias_prior is not None:
        if not 0 < c.disc_bias_prior < 1:
            errors.append(f"disc_bias_prior={c.disc_bias_prior} must be a rate strictly between 0 and 1 "
                          "(try the mask rate, 0.15)")
        elif c.objective != "electra":
            errors.append(f"disc_bias_prior is a replaced-token rate over every position, which --objective "
                          f"electra scores; {c.objective} does not, so leave it unset")
    for name in ("learning_rate", "max_time_s", "max_flops", "temperature"):
        value = getattr(c, name)
        if value is not None and value <= 0:
            errors.append(f"{name}={value} must be positive")
    positions = PRESETS[c.preset].max_position_embeddings if c.preset in PRESETS else None
    if c.seq_len is not None and positions and c.seq_len > positions:
        errors.append(f"seq_len={c.seq_len} exceeds the preset's {positions} positions")
    if c.seq_len is not None and c.seq_len < 8:
        errors.append(f"seq_len={c.seq_len} is too short; use at least 8")
    if c.keep_checkpoints < 1:
        errors.append(f"keep_checkpoints={c.keep_checkpoints} must be at least 1 (resume needs one)")
    if c.preset in PRESETS and c.objective in OBJECTIVES and c.objective not in NO_GENERATOR:
        if not _default_fraction(c):
            errors.append(f"preset {c.preset!r} has no generator (an MLM baseline); use --objective mlm "
                          "or set generator_fraction")
    if c.tokenizer == "train" and c.train_vocab_size < 100:
        errors.append(f"train_vocab_size={c.train_vocab_size} is too small; use at least 100")
    return errors


def check_runnable(config: PretrainConfig) -> None:
    """Raise ValueError unless the run has a corpus, an output directory and a budget."""
    errors = []
    if not config.corpus:
        errors.append("no corpus given; pass --corpus with text files or folders, or glue:TASK,...")
    if not config.output_dir:
        errors.append("no output directory given; pass --output")
    if all(getattr(config, b) is None for b in BUDGETS):
        errors.append("no budget given; set one of max_steps, max_tokens, max_time_s or --max-flops")
    if errors:
        raise ValueError("; ".join(errors))


def resolve(config: PretrainConfig) -> PretrainConfig:
    """The config with every None default filled from the preset and the objective."""
    preset = PRESETS[config.preset]
    two_stage = config.objective == "two-stage"
    return dataclasses.replace(
        config,
        generator_fraction=_default_fraction(config),
        embedding_sharing=config.embedding_sharing or ("untied" if two_stage else "shared"),
        batch_size=config.batch_size or preset.pretrain_batch_size,
        seq_len=config.seq_len or preset.pretrain_seq_len,
        learning_rate=config.learning_rate or preset.pretrain_learning_rate,
        mask_prob=preset.pretrain_mask_prob if config.mask_prob is None else config.mask_prob,
    )


def _default_fraction(config: PretrainConfig) -> float:
    if config.generator_fraction is not None:
        return config.generator_fraction
    if config.objective == "two-stage" or config.embedding_sharing == "tied":
        return 1.0
    return PRESETS[config.preset].generator_fraction


def config_differences(saved: dict, current: PretrainConfig,
                       ignore: tuple[str, ...] = RESUMABLE_CHANGES) -> list[str]:
    """Settings that differ between a saved (resolved) config and this one, as 'key: old -> new'."""
    now = dataclasses.asdict(current)
    saved = LEGACY_DEFAULTS | saved
    return [f"{key}: {saved.get(key)!r} -> {value!r}" for key, value in now.items()
            if key not in ignore and _normal(key, saved.get(key)) != _normal(key, value)]


def _normal(key: str, value):
    """Comparable form: lists for tuples; corpus paths resolved, so `../shared/data/corpus/x` from the
    checkout and the absolute path `harness demo` records are one corpus."""
    if key == "corpus" and value is not None:  # a spec (glue:sst2,...) is no path: kept as written
        return [path if path.startswith(SPEC_PREFIXES) else str(Path(path).resolve()) for path in value]
    return list(value) if isinstance(value, tuple | list) else value
