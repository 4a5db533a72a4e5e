#!/usr/bin/env bash
# Before/after identity of a refactor (reports/results/refactor-identity.md): a tiny GLUE run (rte,
# stsb, cola; 2 seeds) and tiny SQuAD 1.1 and 2.0 runs on CPU with fixed seeds, from the checkout REPO;
# and a tiny pre-training (the test suite's micro preset, electra, 12 steps with checkpoints, resumed to 16;
# the tiny model's vocabulary: a trained WordPiece vocabulary is not reproducible run to run),
# writes OUT/digest.txt (a sha256 per output file; results.json without times, throughput and paths,
# a zip by its members) and OUT/mlflow.txt (every MLflow param, metric and tag, times and pids masked).
# Usage: reports/results/refactor-identity.sh REPO OUT, once per checkout, then diff the two OUTs.
set -euo pipefail
REPO=$1; FINAL=$2; OUT=${RUN_DIR:-/tmp/identity-run}  # one path before and after: results.json records it
PY=${PY:-python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$REPO
rm -rf "$OUT"; mkdir -p "$OUT"
cd "$REPO"
$PY - "$OUT" <<'PY'
import sys
from pathlib import Path
from tests.conftest import write_tiny_model, write_glue_dir
try:  # the fixtures' homes before and after the tests' move (issue 39)
    from tests.test_squad_run import write_squad
    from tests.test_pretrain_train import write_corpus
except ImportError:
    from tests.conftest import write_squad, write_corpus
out = Path(sys.argv[1])
write_tiny_model(out / "inputs" / "tiny")
write_glue_dir(out / "inputs" / "glue_data")
write_squad(out / "inputs" / "squad11" / "dev-v1.1.json", "1.1")
write_squad(out / "inputs" / "squad20" / "dev-v2.0.json", "2.0")
write_corpus(out / "inputs" / "corpus.txt")
PY
H="$PY -m harness.cli"
$H run glue --model "$OUT/inputs/tiny" --tasks rte,stsb,cola --seeds 2 --data-dir "$OUT/inputs/glue_data" \
   --output-dir "$OUT/glue" --tracking-uri "sqlite:///$OUT/mlflow.db" num_epochs=2 precision=fp32 > "$OUT/glue.log" 2>&1
# the micro preset is the test suite's: registered by a launcher, as tests/pretrain_helpers.py does
PRE=(-c "import sys
try:  # the registry's home before and after issue 45
    from pretrain.models.presets import PRESETS
except ImportError:
    from pretrain.common.models import PRESETS
try:
    from tests.test_pretrain_train import MICRO
except ImportError:
    from tests.conftest import MICRO
PRESETS[MICRO.name] = MICRO
from harness.cli import main
sys.exit(main(sys.argv[1:]))" pretrain --preset test-micro --corpus "$OUT/inputs/corpus.txt" --output "$OUT/pretrain"
     --tracking-uri "sqlite:///$OUT/mlflow.db" "tokenizer=$OUT/inputs/tiny" precision=fp32
     "cache_dir=$OUT/cache" checkpoint_every_steps=5 log_every_steps=2)
$PY "${PRE[@]}" max_steps=12 > "$OUT/pretrain.log" 2>&1
$PY "${PRE[@]}" max_steps=16 >> "$OUT/pretrain.log" 2>&1  # a resumed, extended run
for v in 1.1 2.0; do
  d=squad${v/./}
  $H run squad --model "$OUT/inputs/tiny" --version $v --data-dir "$OUT/inputs/$d" --output-dir "$OUT/$d" \
     --tracking-uri "sqlite:///$OUT/mlflow.db" max_length=64 doc_stride=16 max_query_length=16 precision=fp32 \
     batch_size=8 num_epochs=2 learning_rate=2e-3 > "$OUT/$d.log" 2>&1
done
$PY - "$OUT" <<'PY' > "$OUT/digest.txt"
import hashlib, json, sys
from pathlib import Path
out = Path(sys.argv[1])
VOLATILE = {"wall_time_s", "train_time_s", "eval_time_s", "started", "finished", "created", "timestamp",
            "output_dir", "model", "model_path", "host", "seconds", "time_s", "duration_s"}
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in VOLATILE and not k.endswith(("_time_s", "_per_s"))}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
def state_bytes(path):
    import torch
    state = torch.load(path, map_location="cpu", weights_only=False)
    state.get("progress", {}).pop("elapsed_s", None)
    for generator in state.get("rng", []):
        generator.pop("python", None), generator.pop("numpy", None)
    def flat(x):
        if isinstance(x, dict):
            return b"{" + b"".join(repr(k).encode() + flat(v) for k, v in sorted(x.items(), key=str)) + b"}"
        if isinstance(x, list | tuple):
            return b"[" + b"".join(flat(v) for v in x) + b"]"
        if torch.is_tensor(x):
            return str(x.dtype).encode() + str(tuple(x.shape)).encode() + x.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        return repr(x).encode()
    return flat(state)
for run in ("glue", "squad11", "squad20", "pretrain"):
    for path in sorted((out / run).rglob("*")):
        if path.is_file() and ".lock" not in path.name:
            data = path.read_bytes()
            if path.suffix == ".zip":  # members' names and contents, not their timestamps
                import zipfile
                with zipfile.ZipFile(path) as z:
                    data = b"".join(n.encode() + z.read(n) for n in sorted(z.namelist()))
            if path.name == "training_state.pt":  # its tensors and settings; not its elapsed time, nor the
                data = state_bytes(path)          # Python and NumPy RNG states (unseeded, never drawn from)
            if path.name in ("results.json", "pretrain_meta.json"):
                data = json.dumps(strip(json.loads(data)), sort_keys=True, indent=1).encode()
                (out / f"{run}-results.stripped.json").write_bytes(data)
            print(hashlib.sha256(data).hexdigest(), path.relative_to(out))
PY
$PY - "$OUT" <<'PY' > "$OUT/mlflow.txt"
import sqlite3, sys
db = sqlite3.connect(f"{sys.argv[1]}/mlflow.db")
names = dict(db.execute("select run_uuid, value from tags where key='mlflow.runName'"))
exps = dict(db.execute("select r.run_uuid, e.name from runs r join experiments e using(experiment_id)"))
rows = []
for run, key, value in db.execute("select run_uuid, key, value from params"):
    rows.append(f"{exps[run]} | {names.get(run)} | param {key}={value}")
for run, key, value, step in db.execute("select run_uuid, key, value, step from metrics"):
    shown = "*" if key.endswith(("_time_s", "_per_s", "elapsed_s")) or "time" in key else repr(value)
    rows.append(f"{exps[run]} | {names.get(run)} | metric {key}@{step}={shown}")
for run, key, value in db.execute("select run_uuid, key, value from tags where key not like 'mlflow.%'"):
    shown = "*" if "time" in key or key in ("harness.pid", "harness.host") else value
    rows.append(f"{exps[run]} | {names.get(run)} | tag {key}={shown}")
print("\n".join(sorted(rows)))
PY
rm -rf "$FINAL"; cp -r "$OUT" "$FINAL"
cat "$FINAL/digest.txt"; wc -l "$FINAL/mlflow.txt"
