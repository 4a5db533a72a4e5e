#!/usr/bin/env bash
# Issue 46's acceptance check: a published data set nobody here tuned to (GLUE QNLI's dev set, whose
# train file is absent here, so the project never fine-tuned QNLI), rewritten as a CSV and as JSON
# Lines with column names of its own, goes through run (3 seeds) -> compare -> search -> export ->
# predict -> serve. The model is a random-init electra-tiny: the scores are near chance by design;
# the point is the path, and label names in every answer.
#
#   scripts/own_data_check.sh [WORK]   from the repository root (default WORK: runs/own-data-check)
#
# Env: SHARED_DIR (default ../shared), PYTHON (default python3), TRAIN_N (max_train_examples, 800),
# SEARCH_N (the search's max_train_examples, 400), PORT (serve's port, default: a free one).
# Everything, MLflow and Optuna included, is written under WORK; ../shared is only read.
set -euo pipefail

WORK=${1:-runs/own-data-check}
SHARED_DIR=${SHARED_DIR:-../shared}
PYTHON=${PYTHON:-python3}
TRAIN_N=${TRAIN_N:-800}
SEARCH_N=${SEARCH_N:-400}
QNLI=$SHARED_DIR/data/glue/QNLI/dev.tsv
VOCAB=$SHARED_DIR/models/electra-small-discriminator

[[ -f $QNLI ]] || { echo "no $QNLI: set SHARED_DIR to the shared folder" >&2; exit 2; }
mkdir -p "$WORK/logs"
TRACK=sqlite:///$(cd "$WORK" && pwd)/mlflow.db
STORE=sqlite:///$(cd "$WORK" && pwd)/optuna.db
TIMES=$WORK/timings.txt
: > "$TIMES"

harness() { "$PYTHON" -m harness.cli "$@"; }

# step NAME CMD...: runs CMD, its output to the screen and WORK/logs/NAME.log, its seconds to timings
step() {
    local name=$1; shift
    local start=$SECONDS
    echo "=== $name: $*" | tee "$WORK/logs/$name.log"
    "$@" 2>&1 | tee -a "$WORK/logs/$name.log"
    echo "$name $((SECONDS - start))s" | tee -a "$TIMES"
}

# 1. The data: the same rows, QNLI's columns renamed (QUOTE_NONE: some QNLI fields start with '"').
"$PYTHON" - "$QNLI" "$WORK" <<'EOF'
import csv
import json
import sys
from pathlib import Path

source, work = Path(sys.argv[1]), Path(sys.argv[2])
with source.open(encoding="utf-8", newline="") as handle:
    rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
with (work / "qnli.csv").open("w", encoding="utf-8", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["query", "passage", "relation"])
    writer.writerows([row["question"], row["sentence"], row["label"]] for row in rows)
with (work / "qnli.jsonl").open("w", encoding="utf-8") as handle:
    for row in rows:
        handle.write(json.dumps({"q": row["question"], "p": row["sentence"],
                                 "answer_relation": row["label"]}) + "\n")
print(f"wrote {len(rows)} rows to {work}/qnli.csv (query, passage, relation) and "
      f"{work}/qnli.jsonl (q, p, answer_relation)")
EOF

# 2. The model: random-init electra-tiny with ELECTRA-Small's vocabulary (no weights exist here).
step init harness init --preset electra-tiny --tokenizer "$VOCAB" --output "$WORK/model" --keep-existing

# 3. Two runs on the CSV, 3 seeds each, the dev split drawn from the file; the recipe's rate vs 1e-4.
CSV_TASK=(--train "$WORK/qnli.csv" --text query,passage --label relation --name qnli-csv)
step run-csv-a harness run text --model "$WORK/model" "${CSV_TASK[@]}" --seeds 3 \
    --output-dir "$WORK/runs/csv-recipe-lr" --tracking-uri "$TRACK" max_train_examples="$TRAIN_N"
step run-csv-b harness run text --model "$WORK/model" "${CSV_TASK[@]}" --seeds 3 \
    --output-dir "$WORK/runs/csv-lr1e-4" --tracking-uri "$TRACK" max_train_examples="$TRAIN_N" \
    learning_rate=1e-4
step compare harness compare "$WORK/runs/csv-recipe-lr" "$WORK/runs/csv-lr1e-4"

# 4. A small search on the same description.
step search harness search text --model "$WORK/model" "${CSV_TASK[@]}" --trials 3 \
    --storage "$STORE" --study-name qnli-csv-check --output-dir "$WORK/search" \
    --tracking-uri "$TRACK" max_train_examples="$SEARCH_N"

# 5. The JSON Lines file, other column names.
step run-jsonl harness run text --model "$WORK/model" --train "$WORK/qnli.jsonl" --text q,p \
    --label answer_relation --name qnli-jsonl --seeds 3 --output-dir "$WORK/runs/jsonl" \
    --tracking-uri "$TRACK" max_train_examples="$TRAIN_N"

# 6. Bundles (int8 too), torch-free predictions, a served one.
step export-csv harness export onnx --run "$WORK/runs/csv-recipe-lr" --quantize int8 \
    --output "$WORK/bundles/csv" --tracking-uri "$TRACK"
step export-jsonl harness export onnx --run "$WORK/runs/jsonl" --quantize int8 \
    --output "$WORK/bundles/jsonl" --tracking-uri "$TRACK"
step predict-args harness predict --bundle "$WORK/bundles/csv" \
    "What is the capital of France?" "Paris is the capital and most populous city of France."
printf '%s\n' \
    '{"id": "a", "text": "Who wrote Hamlet?", "text_pair": "Hamlet was written by William Shakespeare."}' \
    '{"id": "b", "text": "Who wrote Hamlet?", "text_pair": "The river flows north into the sea."}' \
    > "$WORK/requests.jsonl"
step predict-jsonl harness predict --bundle "$WORK/bundles/jsonl" --input "$WORK/requests.jsonl"

PORT=${PORT:-$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
# not through harness(): $! must be the server itself, not a subshell that would leave it running
"$PYTHON" -m harness.cli serve --bundle "$WORK/bundles/jsonl" --port "$PORT" > "$WORK/logs/serve.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/logs/serve.log" >&2; exit 1; }
    sleep 1
done
step serve-post curl -sS --fail-with-body "http://127.0.0.1:$PORT/predict" -H 'content-type: application/json' \
    -d '[{"id": 1, "text": "Who wrote Hamlet?", "text_pair": "Hamlet was written by William Shakespeare."}, {"id": 2, "text": "Who wrote Hamlet?", "text_pair": "The river flows north into the sea."}]'
echo
kill "$SERVER"
wait "$SERVER" || true
trap - EXIT
echo "--- serve log"; cat "$WORK/logs/serve.log"
echo "--- timings"; cat "$TIMES"
