"""A randomly initialised discriminator checkpoint: the untrained control of experiments."""

from __future__ import annotations

from pathlib import Path

from foundation.infra.atomic import save_pretrained
from foundation.models import pretrain_meta
from foundation.models.layout import PRETRAIN_META


def write_random_init(model_config, tokenizer, output: Path, seed: int = 0):
    """A fresh ElectraForPreTraining of `model_config` and `tokenizer`, written atomically to `output`."""
    import transformers

    transformers.set_seed(seed)
    model = transformers.ElectraForPreTraining(model_config)
    save_pretrained(output, model, tokenizer)
    # Its pre-training record, as `harness pretrain` leaves one: the leaderboard's FLOPs read it (0, not
    # unknown), so an untrained control says what it cost.
    pretrain_meta.write(output / PRETRAIN_META, pretrain_meta.untrained(seed), sort_keys=False)
    return model
