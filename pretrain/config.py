"""`PretrainConfig`: every setting of a pre-training run, frozen, validated all at once.

Fields left as None take the preset's value (or the objective's default) in `resolve()`, so a
saved config always states what the run actually used.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from foundation.infra.settings import Flag, choice_errors, differences, of_role, setting
from foundation.models.presets import PRESETS
from foundation.training.optimizer_settings import Optimizer, optimizer_errors, optimizer_setting
from pretrain.corpus_source import SPEC_PREFIXES

Objective = Literal["electra", "mlm", "electra-15", "replace-mlm", "all-tokens-mlm", "two-stage"]
Sharing = Literal["shared", "untied", "tied", "gdes"]
OBJECTIVES: tuple[str, ...] = Objective.__args__

# Objectives without a separate generator network.
NO_GENERATOR = ("mlm",)
LEVERS = "reports/results/pretrain-levers.md"  # where the small-budget levers below were measured


@dataclass(frozen=True)
class PretrainConfig:
    """One pre-training run. Budgets stop the run at whichever is reached first."""

    preset: str = setting("electra-tiny", role="recipe", flag=Flag("--preset", choices=PRESETS),
                          help="model shapes and the paper's values for them")
    corpus: tuple[str, ...] = setting((), role="recipe", flag=Flag("--corpus", "PATH", repeat=True), help=(
        "text files or folders (.txt/.raw, optionally gzipped; repeat --corpus for more): one paragraph a "
        "line, a blank line between documents; or glue:TASK,... for those GLUE tasks' training inputs "
        "(never dev or test; pretrain/corpus_source.py), packed into whole sequences; kept as written, so "
        "a resume compares the spec, not a cache file"))
    output_dir: str = setting("", role="output", resumable=True, flag=Flag("--output", "DIR"), help=(
        "the run's folder: checkpoints, discriminator/, generator/, pretrain_meta.json; resumed if it holds "
        "a checkpoint"))
    objective: Objective = setting("electra", role="recipe", flag=Flag("--objective"), help=(
        "electra (the paper's), mlm (BERT's baseline), electra-15 (detection on masked positions only), "
        "replace-mlm, all-tokens-mlm, two-stage (paper Table 5 and section 3.2)"))

    # Model
    generator_fraction: float | None = setting(None, role="recipe",
                                               help="generator width / discriminator width; None: preset's")
    embedding_sharing: Sharing | None = setting(None, role="recipe",
                                                help='None: "shared" ("untied" for two-stage)')
    tokenizer: str | None = setting(None, role="recipe", help=(
        'tokenizer dir or vocab.txt; None: BERT uncased; "train": a new WordPiece'))
    train_vocab_size: int = setting(30522, role="recipe", help="only with tokenizer=train")

    # Objective (paper values)
    mask_prob: float | None = setting(None, role="recipe", help=(
        "None: the preset's (0.15; 0.25 for electra-large, as ELECTRA's Large)"))
    mask_token_fraction: float = setting(0.85, role="recipe", help="of masked positions, shown as [MASK]")
    random_token_fraction: float = setting(0.0, role="recipe", help=(
        "of masked positions, shown as a random token (BERT: 0.1)"))
    disc_weight: float = setting(50.0, role="recipe", help=(
        "lambda, the detection loss's weight against the generator's MLM loss (paper: 50)"))
    temperature: float = setting(1.0, role="recipe", help=(
        "the generator's sampling temperature (1: its softmax)"))
    two_stage_switch: float = setting(0.5, role="recipe", help=(
        "fraction of the budget spent on the generator in two-stage"))

    # Optimisation; None: preset's
    batch_size: int | None = setting(None, role="recipe", help="global batch, split across DDP processes")
    seq_len: int | None = setting(None, role="recipe", help="tokens a sequence; None: the preset's")
    learning_rate: float | None = setting(None, role="recipe", help=(
        "peak rate; None: the preset's (the paper's for its size)"))
    warmup_fraction: float = setting(0.01, role="recipe", help=(
        "of the budget; the paper warms up 10k of 1M steps"))
    optimizer: Optimizer = optimizer_setting("optimizer")
    weight_decay: float = optimizer_setting("weight_decay")
    adam_epsilon: float = optimizer_setting("adam_epsilon")
    max_grad_norm: float = optimizer_setting("max_grad_norm")
    disc_layers_lr_scale: float = setting(1.0, role="recipe", help=(
        "learning-rate multiplier for the discriminator's layers and detection head, not the embeddings "
        f"it shares with the generator; 1 is the paper's; a small-budget lever ({LEVERS})"))
    disc_bias_prior: float | None = setting(None, role="recipe", help=(
        "the detection head's starting bias as a replaced-token rate p (bias log(p / (1 - p))), the usual "
        f"prior of an imbalanced classifier; None: 0, the paper's; a small-budget lever ({LEVERS})"))

    # Budgets: at least one
    max_steps: int | None = setting(None, role="budget", help='stop after this many optimiser steps')
    max_tokens: int | None = setting(None, role="budget", help=(
        'stop after this many training tokens (batch x seq_len a step)'))
    max_time_s: float | None = setting(None, role="budget", help=(
        'stop after this many seconds of training (checkpointed, resumable)'))
    max_flops: float | None = setting(None, role="budget", flag=Flag("--max-flops", "N"), help=(
        "stop after this many training FLOPs (the paper's counting), e.g. 1e15"))

    # Runtime
    precision: Literal["auto", "bf16", "fp32", "fp16"] = setting("auto", role="runtime",
                                                                 help="fp16: with a gradient scaler")
    gradient_accumulation_steps: int = setting(1, role="runtime", resumable=True, help=(
        "slices of each process's batch, forward and backward one at a time, then one optimiser step: the "
        "recipe's batch in less memory (each slice's loss weighted by its share of the batch)"))
    attention: Literal["auto", "eager", "sdpa"] = setting("auto", role="runtime",
                                                          help="auto: eager on a CPU in bf16, else SDPA")
    compile: Literal["auto", "on", "off"] = setting("auto", role="runtime", resumable=True, help=(
        "torch.compile the step; auto: on for CUDA only"))
    compile_optimizer: bool = setting(False, role="runtime", resumable=True, help=(
        "torch.compile ELECTRA's Adam's update, its rates held on the device (on CUDA, meant for a CUDA "
        "graph; unmeasured): faster updates after minutes of compiling (twice for two-stage); off until a "
        "GPU measures whether that pays (reports/results/performance.md)"))
    device: str = setting("auto", role="runtime", resumable=True, help=(
        'auto: CUDA if present, else the CPU; or cpu, cuda, cuda:1'))
    seed: int = setting(0, role="runtime", help='masking, sampling, dropout and initialisation draws')
    log_every_steps: int = setting(10, role="output", resumable=True, help=(
        'steps between logged metrics (and the probes, at most every 1% of the budget)'))
    checkpoint_every_steps: int = setting(1000, role="output", resumable=True, help=(
        'steps between checkpoints'))
    checkpoint_every_s: float = setting(600.0, role="output", resumable=True, help=(
        'seconds between checkpoints, whichever of the two comes first'))
    keep_checkpoints: int = setting(2, role="output", resumable=True, help=(
        'newest checkpoints kept; older ones are deleted'))
    cache_dir: str = setting("runs/cache", role="output", resumable=True, help=(
        'tokenised corpora and trained vocabularies, shared between runs'))

    def __post_init__(self):
        errors = _check(self)
        if errors:
            raise ValueError("; ".join(errors))

    @property
    def has_generator(self) -> bool:
        return self.objective not in NO_GENERATOR


# A run stops at the first of these reached; changing them continues a run (checkpoint.budget_change).
BUDGETS = of_role(PretrainConfig, "budget")


def _check(c: PretrainConfig) -> list[str]:
    errors = []
    if c.preset not in PRESETS:
        errors.append(f"unknown preset {c.preset!r}; choose one of {', '.join(PRESETS)}")
    errors += choice_errors(c)  # objective, embedding_sharing, optimizer, ...: from their Literal types
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
    for name in ("batch_size", "seq_len", "max_steps", "max_tokens", "log_every_steps", "train_vocab_size",
                 "gradient_accumulation_steps"):
        value = getattr(c, name)
        if value is not None and value <= 0:
            errors.append(f"{name}={value} must be positive")
    if c.batch_size is not None and c.gradient_accumulation_steps > c.batch_size:
        errors.append(f"gradient_accumulation_steps={c.gradient_accumulation_steps} would slice a batch of "
                      f"{c.batch_size} into empty slices; use at most {c.batch_size}")
    if c.compile_optimizer and c.optimizer != "electra":
        errors.append(f"compile_optimizer compiles ELECTRA's Adam; optimizer={c.optimizer} is torch's fused "
                      "AdamW, one kernel already: drop compile_optimizer or use optimizer=electra")
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
    return errors + optimizer_errors(c)


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


def config_differences(saved: dict, current: PretrainConfig, may_change: tuple[str, ...] = ()) -> list[str]:
    """Settings a resume may not change that differ between a saved (resolved) config and this one, as
    'key: old -> new' (one rule with fine-tuning's: foundation/infra/settings.py); a key the saved config
    lacks is the value runs had before that setting existed. `may_change`: more settings to let differ."""
    found = differences(PretrainConfig, saved, dataclasses.asdict(current), may_change=may_change,
                        normal=_normal)
    return [f"{key}: {old!r} -> {new!r}" for key, old, new in found]


def _normal(key: str, value):
    """Comparable form: lists for tuples; corpus paths resolved, so `../shared/data/corpus/x` from the
    checkout and the absolute path `harness demo` records are one corpus."""
    if key == "corpus" and value is not None:  # a spec (glue:sst2,...) is no path: kept as written
        return [path if path.startswith(SPEC_PREFIXES) else str(Path(path).resolve()) for path in value]
    return list(value) if isinstance(value, tuple | list) else value
