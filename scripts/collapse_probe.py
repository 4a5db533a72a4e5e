"""How collapsed is each checkpoint's encoder on real sentences? For the levers' table.

For each discriminator directory given, on the first 256 SST-2 dev sentences: the effective rank of
its last-layer [CLS] states and the mean cosine between a sentence's positions in the last layer;
then that cosine on the pre-training probe batch (Gutenberg, the demo's plan, seed 0), as
pretrain/probe.py logs it during pre-training (the corpus is tokenised into runs/cache once).
A second line per model goes layer by layer: the effective rank of all (non-pad) token states after
the embeddings and after each layer, and the mean per-token std of each layer's feed-forward
LayerNorm input. ELECTRA is post-LN, so that LayerNorm divides the gradient flowing back to the
layer below by this std: 1.0 in random weights, above it where a layer's output outgrew its input.
Usage: python scripts/collapse_probe.py DIR [DIR ...] (SHARED_DIR or ../shared).
"""

import csv
import os
import sys
from pathlib import Path

import torch
import transformers

from foundation.training import distributed
from pretrain import probe
from pretrain.config import PretrainConfig, resolve
from pretrain.corpus_source import from_paths
from pretrain.prepare import prepare_examples
from pretrain.probe import position_cosine

transformers.logging.set_verbosity_error()


def effective_rank(rows: torch.Tensor) -> float:
    """exp(entropy) of the centred rows' normalised squared singular values (Roy & Vetterli 2007): 1 for
    rows on one line, d for rows spread evenly over d directions."""
    values = torch.linalg.svdvals(rows - rows.mean(dim=0)) ** 2
    share = values / values.sum()
    return float(torch.exp(-(share * share.clamp_min(1e-30).log()).sum()))


def states_and_scales(model, batch, mask) -> tuple[tuple[torch.Tensor, ...], list[float]]:
    """Every layer's output states, and each layer's feed-forward LayerNorm input std (mean over the
    tokens `mask` keeps)."""
    scales = []

    def record(module, inputs, output):
        scales.append(float(inputs[0][mask].std(-1).mean()))

    hooks = [layer.output.LayerNorm.register_forward_hook(record) for layer in model.encoder.layer]
    with torch.no_grad():
        states = model(**batch, output_hidden_states=True).hidden_states
    for hook in hooks:
        hook.remove()
    return states, scales


shared = Path(os.environ.get("SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
with open(shared / "data/glue/SST-2/dev.tsv", newline="") as handle:
    rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
    sentences = [row["sentence"] for row in rows][:256]
config = resolve(PretrainConfig(preset="electra-tiny", corpus=(str(shared / "data/corpus/gutenberg"),),
                                output_dir="unused", max_flops=1e14, cache_dir="runs/cache"))
pretrain_tokenizer, examples = prepare_examples(config, distributed.start("cpu"),
                                                list(from_paths(config.corpus).files))
probe_batch = probe.fixed_batch(examples, config, pretrain_tokenizer.pad_token_id, torch.device("cpu"))
for path in sys.argv[1:]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    real = batch["attention_mask"].bool()  # the tokens, not the padding
    states, scales = states_and_scales(model, batch, real)
    hidden = states[-1]
    on_probe = "n/a (another vocabulary)"
    if tokenizer.get_vocab() == pretrain_tokenizer.get_vocab():
        with torch.no_grad():
            probe_hidden = model(**probe_batch).last_hidden_state
        on_probe = f"{position_cosine(probe_hidden, probe_batch['attention_mask']):.2f}"
    on_sst2 = position_cosine(hidden, batch["attention_mask"])
    print(f"{path}\tSST-2: cls_rank {effective_rank(hidden[:, 0]):.1f}, position_cosine {on_sst2:.2f}\t"
          f"probe batch: position_cosine {on_probe}")
    tokens = [effective_rank(layer[real]) for layer in states]
    print(f"\ttoken rank by depth (embeddings, layer 1, ...): {' '.join(f'{r:.1f}' for r in tokens)}\t"
          f"feed-forward LayerNorm input std by layer: {' '.join(f'{v:.2f}' for v in scales)}")
