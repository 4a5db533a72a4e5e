#!/usr/bin/env bash
# Before/after identity of a refactor (reports/results/refactor-identity.md): a tiny GLUE run (rte,
# stsb, cola; 2 seeds) and tiny SQuAD 1.1 and 2.0 runs on CPU with fixed seeds, from the checkout REPO;
# writes OUT/digest.txt (a sha256 per output file; results.json without times, throughput and paths,
# a zip by its members) and OUT/mlflow.txt (every MLflow param, metric and tag, times and pids masked).
# Usage: reports/results/refactor-identity.sh REPO OUT, once per checkout, then diff the two OUTs.
set -euo pipefail
REPO=$1; FINAL=$2; OUT=/tmp/identity-run  # one path before and after: results.json records it
PY=${PY:-python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$REPO
rm -rf "$OUT"; mkdir -p "$OUT"
cd "$REPO"
$PY - "$OUT" <<'PY'
import sys
from pathlib import Path
from tests.conftest import write_tiny_model, write_glue_dir
from tests.test_squad_run import write_squad
out = Path(sys.argv[1])
write_tiny_model(out / "inputs" / "tiny")
write_glue_dir(out / "inputs" / "glue_data")
write_squad(out / "inputs" / "squad11" / "dev-v1.1.json", "1.1")
write_squad(out / "inputs" / "squad20" / "dev-v2.0.json", "2.0")
PY
H="$PY -m harness.cli"
$H run glue --model "$OUT/inputs/tiny" --tasks rte,stsb,cola --seeds 2 --data-dir "$OUT/inputs/glue_data" \
   --output-dir "$OUT/glue" --tracking-uri "sqlite:///$OUT/mlflow.db" num_epochs=2 precision=fp32 > "$OUT/glue.log" 2>&1
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
for run in ("glue", "squad11", "squad20"):
    for path in sorted((out / run).rglob("*")):
        if path.is_file() and ".lock" not in path.name:
            data = path.read_bytes()
            if path.suffix == ".zip":  # members' names and contents, not their timestamps
                import zipfile
                with zipfile.ZipFile(path) as z:
                    data = b"".join(n.encode() + z.read(n) for n in sorted(z.namelist()))
            if path.name == "results.json":
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
    shown = "*" if key.endswith(("_time_s", "_per_s")) or "time" in key else repr(value)
    rows.append(f"{exps[run]} | {names.get(run)} | metric {key}@{step}={shown}")
for run, key, value in db.execute("select run_uuid, key, value from tags where key not like 'mlflow.%'"):
    shown = "*" if "time" in key or key in ("harness.pid", "harness.host") else value
    rows.append(f"{exps[run]} | {names.get(run)} | tag {key}={shown}")
print("\n".join(sorted(rows)))
PY
rm -rf "$FINAL"; cp -r "$OUT" "$FINAL"
cat "$FINAL/digest.txt"; wc -l "$FINAL/mlflow.txt"
