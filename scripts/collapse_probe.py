"""How collapsed is each checkpoint's encoder on real sentences? For the levers' table.

For each discriminator directory given: the effective rank of its last-layer [CLS] states over the
first 256 SST-2 dev sentences (pretrain.probe.effective_rank, as the `cls_rank` probe computes it
on the pre-training batch) and the mean cosine between a sentence's positions in the last layer.
Usage: python reports/results/pretrain-levers-collapse.py DIR [DIR ...] (SHARED_DIR or ../shared).
"""

import csv
import os
import sys
from pathlib import Path

import torch
import transformers

from pretrain.probe import effective_rank

transformers.logging.set_verbosity_error()
shared = Path(os.environ.get("SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
with open(shared / "data/glue/SST-2/dev.tsv", newline="") as handle:
    sentences = [row["sentence"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)][:256]
for path in sys.argv[1:]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    unit = torch.nn.functional.normalize(hidden, dim=-1)
    cosines = [(u[m][:, None] * u[m][None]).sum(-1).mean() for u, m in zip(unit, batch["attention_mask"].bool())]
    print(f"{path}\tcls_rank {effective_rank(hidden[:, 0]):.1f}\tposition cosine {torch.stack(cosines).mean():.2f}")
