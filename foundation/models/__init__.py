"""Model identity: what a model is, where its files lie and what it costs. shapes (the dimensions a count
needs, from any encoder's config), presets (the one model registry), layout (a checkpoint's weights files
and a pre-training output's folders), pretrain_meta (pretrain_meta.json's schema), resolve (a `--model`
value to a local checkpoint), identity (a run's model resolved once: its key, config.json and
pre-training record), hub (Hub ids from the Hub or its cache), checkpoint_check (damaged or
mismatched checkpoint files, one line) and flops (the paper's FLOPs formulas).

It imports only foundation/infra/. Pre-training, the fine-tuning and export commands, and reports find
models here; the fine-tuning loop (tasks/) needs none of it.
"""
