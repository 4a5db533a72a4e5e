#!/usr/bin/env bash
# reports/results/leaderboard-every-kind.png: `harness report --runs` over a real run of each kind and the
# published encoder minilm-l6, screenshot by scripts/leaderboard_screenshot.py. Runs from the repository
# root in the project's environment, offline, into runs/screenshot (each run's model named as typed there,
# no temporary paths; the published run is not named minilm-l6: a folder of that name in the working
# directory would be read as the model); ~10 min on one core: the tiny model's runs take seconds, minilm-l6's SST-2 most of it.
set -euo pipefail
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SHARED=${SHARED_DIR:-../shared}
PY=${PYTHON:-python}
ROOT=$PWD
mkdir -p runs/screenshot && cd runs/screenshot
export PYTHONPATH=$ROOT
harness() { "$PY" -m harness.cli "$@" --tracking-uri none; }
# the tiny random model of tests/conftest.py (128 positions) and small files of each kind from the shared data
"$PY" - "$SHARED" <<'PYTHON'
import json, random, sys
from pathlib import Path
from tests.conftest import write_tiny_model
shared = Path(sys.argv[1]) / "data"
if not Path("tiny/config.json").is_file():
    write_tiny_model(Path("tiny"), positions=128)
def rows(path, header=True):
    lines = path.read_text(encoding="utf-8").splitlines()
    names = lines[0].split("\t")
    return [dict(zip(names, line.split("\t"))) for line in lines[1:]]
def sample(items, n, seed):
    return random.Random(seed).sample(items, n)
def jsonl(name, items):
    Path(name).write_text("".join(json.dumps(item) + "\n" for item in items))
sst = rows(shared / "glue/SST-2/train.tsv")
for split, seed in (("train", 1), ("dev", 2)):
    chosen = sample(sst, 64, seed)
    jsonl(f"reviews-{split}.jsonl", [{"text": r["sentence"], "label": ["negative", "positive"][int(r["label"])]}
                                      for r in chosen])
    jsonl(f"topics-{split}.jsonl", [{"text": r["sentence"],
                                     "labels": [t for t in ("film", "story", "funny") if t in r["sentence"]]}
                                    for r in chosen])
sts = rows(shared / "glue/STS-B/train.tsv")
for split, seed in (("train", 3), ("dev", 4)):
    jsonl(f"similarity-{split}.jsonl", [{"a": r["sentence1"], "b": r["sentence2"], "score": float(r["score"])}
                                        for r in sample(sts, 64, seed)])
blocks = [b for b in (shared / "conll2000/train.txt").read_text().split("\n\n") if b.strip()]
for split, seed in (("train", 5), ("dev", 6)):
    Path(f"chunks-{split}.txt").write_text("\n\n".join(sample(blocks, 64, seed)) + "\n")
PYTHON
fast="num_epochs=1 precision=fp32 save_models=true"
harness run text --model tiny --train reviews-train.jsonl --dev reviews-dev.jsonl --text text --label label \
    --output-dir classification --seeds 2 $fast
harness run text --model tiny --train similarity-train.jsonl --dev similarity-dev.jsonl --text a,b --label score \
    --problem regression --output-dir regression $fast
harness run text --model tiny --train topics-train.jsonl --dev topics-dev.jsonl --text text --label labels \
    --problem multilabel --output-dir multilabel $fast
harness run tagging --model tiny --train chunks-train.txt --dev chunks-dev.txt --output-dir tagging $fast
harness run glue --model tiny --tasks rte --data-dir "$SHARED/data/glue" --output-dir glue $fast \
    max_train_examples=64 predict_test=false
harness eval glue --model glue/models/rte-seed0 --tasks rte --data-dir "$SHARED/data/glue" --output-dir eval
# the published encoder as the demo's act trains it on SST-2 (500 examples, fp32, 3 seeds)
harness run glue --model minilm-l6 --tasks sst2 --data-dir "$SHARED/data/glue" --output-dir sst2-minilm-l6 --seeds 3 \
    max_train_examples=500 precision=fp32 predict_test=false save_models=true
cd "$ROOT"
"$PY" scripts/leaderboard_screenshot.py reports/results/leaderboard-every-kind.png --window 1500,1500 --html \
    runs/screenshot/{classification,regression,multilabel,tagging,glue,eval,sst2-minilm-l6}
