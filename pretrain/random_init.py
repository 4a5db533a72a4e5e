"""A randomly initialised discriminator checkpoint: the untrained control of experiments."""

from __future__ import annotations

from pathlib import Path

from pretrain.atomic import save_pretrained


def write_random_init(model_config, tokenizer, output: Path, seed: int = 0):
    """A fresh ElectraForPreTraining of `model_config` and `tokenizer`, written atomically to `output`."""
    import transformers

    transformers.set_seed(seed)
    model = transformers.ElectraForPreTraining(model_config)
    save_pretrained(output, model, tokenizer)
    return model
