#!/usr/bin/env bash
# Before/after identity of a refactor (reports/results/refactor-identity.md): a tiny GLUE run (rte,
# stsb, cola; 2 seeds) and tiny SQuAD 1.1 and 2.0 runs on CPU with fixed seeds, from the checkout REPO;
# a tiny pre-training (the test suite's micro preset, electra, 12 steps with checkpoints, resumed to 16;
# the tiny model's vocabulary: a trained WordPiece vocabulary is not reproducible run to run);
# `harness run text` on own-data files the script writes (a CSV of string classes, and JSON Lines of
# label lists: multilabel; 2 seeds each) and `harness run tagging` on CoNLL-column chunk files it writes
# (IOB2, 2 seeds); `harness export onnx --quantize int8` of the GLUE run's rte, the text classification
# run and the tagging run, and `harness predict` with each bundle on fixed inputs (fp32 and int8).
# Writes OUT/digest.txt (a sha256 per output file; results.json without times, throughput and paths,
# a zip by its members, a bundle's manifest without its creation and export times, MLflow run id and
# seal; the ONNX files and the predictions byte for byte) and OUT/mlflow.txt (every MLflow param,
# metric and tag of every run in every experiment, and the export's logged models' names, params, tags
# and metrics; times, pids, hosts, MLflow's own tags and its random ids left out or masked). What is
# masked is what differs between two runs of the same code (wall clock, process, random ids) or names
# the checkout (mlflow.source.name); two runs of one checkout give identical files (2026-11-28).
# Usage: reports/results/refactor-identity.sh REPO OUT, once per checkout, then diff the two OUTs.
set -euo pipefail
REPO=$1; FINAL=$2; OUT=${RUN_DIR:-/tmp/identity-run}  # one path before and after: results.json records it
PY=${PY:-python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$REPO
rm -rf "$OUT"; mkdir -p "$OUT"
cd "$REPO"
$PY - "$OUT" <<'PY'
import json, random, sys
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
# Own data, written here (not by the tests' helpers, which a refactor may move): words of the tiny
# model's vocabulary, the class learnable from one word.
own = out / "inputs" / "own"
own.mkdir()
CLASSES = {"happy": "joy", "good": "joy", "sad": "grief", "bad": "grief", "cat": "animal", "dog": "animal"}
for split, n, seed in (("train", 40, 1), ("dev", 16, 2)):
    rng = random.Random(seed)
    rows, tagged = [], []
    for i in range(n):
        word = ["happy", "sad", "cat", "good", "bad", "dog"][i % 6]
        subject = rng.choice(["the film", "he", "she", "a dog", "the cat", "they"])
        text = f"{subject} was {rng.choice(['very', 'quite', 'not'])} {word} ."
        rows.append((text, CLASSES[word], sorted({CLASSES[word]} | ({"animal"} if "dog" in subject or "cat" in subject else set()))))
    with (own / f"{split}.csv").open("w", encoding="utf-8") as handle:
        handle.write("utterance,intent\n")
        handle.writelines(f'"{text}",{label}\n' for text, label, _ in rows)
    with (own / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"sentence": text, "topics": tags}) + "\n" for text, _, tags in rows)
# CoNLL columns (word, POS, chunk tag in IOB2): NP 'the/a ADJ* NOUN', VP 'sat/ran', PP 'on', O '.'
for split, n, seed in (("train", 40, 0), ("dev", 12, 1)):
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- O", ""]
    for _ in range(n):
        for _ in range(rng.randint(1, 3)):
            lines += [f"{rng.choice(['the', 'a'])} DT B-NP",
                      *(f"{w} JJ I-NP" for w in rng.sample(["big", "small", "red"], rng.randint(0, 2))),
                      f"{rng.choice(['cat', 'dog', 'mat'])} NN I-NP", f"{rng.choice(['sat', 'ran'])} VBD B-VP",
                      "on IN B-PP"]
        lines += [". . O", ""]
    (own / f"chunks-{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
# fixed inputs for `harness predict` of each bundle
(own / "predict-glue.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
    {"text": "the cat was very happy .", "text_pair": "the cat is happy .", "id": 1},
    {"text": "a dog was sad .", "text_pair": "she is good ."},
    {"text": "the film was not bad .", "text_pair": "it was bad ."}]))
(own / "predict-text.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
    {"text": "a dog was very happy .", "id": 1}, {"text": "she was quite sad ."}, {"text": "they saw a cat ."}]))
(own / "predict-tagging.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
    {"text": "The big cat sat on the mat, and a small dog ran.", "id": 1},
    {"tokens": ["a", "red", "dog", "sat"]}, {"text": " ".join(["the big cat sat on the mat ."] * 10)}]))
PY
H="$PY -m harness.cli"
T=(--tracking-uri "sqlite:///$OUT/mlflow.db")
$H run glue --model "$OUT/inputs/tiny" --tasks rte,stsb,cola --seeds 2 --data-dir "$OUT/inputs/glue_data" \
   --output-dir "$OUT/glue" "${T[@]}" num_epochs=2 precision=fp32 > "$OUT/glue.log" 2>&1
# the micro preset is the test suite's: registered by a launcher, as tests/pretrain_helpers.py does
PRE=(-c "import sys
try:  # the registry's home after issue 58, after issue 45, and before
    from foundation.models.presets import PRESETS
except ImportError:
    try:
        from pretrain.models.presets import PRESETS
    except ImportError:
        from pretrain.common.models import PRESETS
try:
    from tests.test_pretrain_train import MICRO
except ImportError:
    try:
        from tests.conftest import MICRO
    except ImportError:
        from tests.pretrain_helpers import MICRO
PRESETS[MICRO.name] = MICRO
from harness.cli import main
sys.exit(main(sys.argv[1:]))" pretrain --preset test-micro --corpus "$OUT/inputs/corpus.txt" --output "$OUT/pretrain"
     "${T[@]}" "tokenizer=$OUT/inputs/tiny" precision=fp32
     "cache_dir=$OUT/cache" checkpoint_every_steps=5 log_every_steps=2)
$PY "${PRE[@]}" max_steps=12 > "$OUT/pretrain.log" 2>&1
$PY "${PRE[@]}" max_steps=16 >> "$OUT/pretrain.log" 2>&1  # a resumed, extended run
for v in 1.1 2.0; do
  d=squad${v/./}
  $H run squad --model "$OUT/inputs/tiny" --version $v --data-dir "$OUT/inputs/$d" --output-dir "$OUT/$d" \
     "${T[@]}" max_length=64 doc_stride=16 max_query_length=16 precision=fp32 \
     batch_size=8 num_epochs=2 learning_rate=2e-3 > "$OUT/$d.log" 2>&1
done
# own data: string classes from a CSV, and label lists (multilabel) from JSON Lines
I=$OUT/inputs/own
FAST=(precision=fp32 num_epochs=2 batch_size=8 learning_rate=3e-3)
$H run text --model "$OUT/inputs/tiny" --train "$I/train.csv" --dev "$I/dev.csv" --text utterance --label intent \
   --name intents --seeds 2 --output-dir "$OUT/text/intents" "${T[@]}" "${FAST[@]}" > "$OUT/text.log" 2>&1
$H run text --model "$OUT/inputs/tiny" --train "$I/train.jsonl" --dev "$I/dev.jsonl" --text sentence --label topics \
   --name topics --seeds 2 --output-dir "$OUT/text/topics" "${T[@]}" "${FAST[@]}" >> "$OUT/text.log" 2>&1
$H run tagging --model "$OUT/inputs/tiny" --train "$I/chunks-train.txt" --dev "$I/chunks-dev.txt" --name phrases \
   --seeds 2 --output-dir "$OUT/tagging" "${T[@]}" precision=fp32 num_epochs=2 batch_size=8 learning_rate=3e-3 \
   > "$OUT/tagging.log" 2>&1
# bundles (fp32 and int8 ONNX, parity and dev quality in the manifest), and their answers to fixed inputs
B=$OUT/bundles
mkdir -p "$B"
$H export onnx --run "$OUT/glue" --task rte --quantize int8 --data-dir "$OUT/inputs/glue_data" --output "$B/glue-rte" \
   "${T[@]}" > "$OUT/export.log" 2>&1
$H export onnx --run "$OUT/text/intents" --quantize int8 --output "$B/text-intents" "${T[@]}" >> "$OUT/export.log" 2>&1
$H export onnx --run "$OUT/tagging" --quantize int8 --output "$B/tagging" "${T[@]}" >> "$OUT/export.log" 2>&1
for b in glue-rte:glue text-intents:text tagging:tagging; do
  for p in fp32 int8; do
    $H predict --bundle "$B/${b%%:*}" --precision $p --input "$I/predict-${b##*:}.jsonl" \
       > "$B/${b%%:*}.predict-$p.jsonl" 2>> "$OUT/predict.log"
  done
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
def manifest(data):
    # a bundle's manifest without what differs between two exports of the same code: its creation time,
    # export_time_s, the export's random MLflow run id, and its seal (manifest_sha256, a checksum over the
    # rest, those included). The files' sha256 stay: model.onnx and model.int8.onnx are byte-identical
    # run to run (checked 2026-11-28), and are digested themselves too.
    found = json.loads(data)
    for key in ("created", "export_time_s", "mlflow_run_id", "manifest_sha256"):
        found.pop(key, None)
    return json.dumps(found, sort_keys=True, indent=1).encode()
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
for run in ("glue", "squad11", "squad20", "pretrain", "text", "tagging", "bundles"):
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
            if path.name == "manifest.json":
                data = manifest(data)
            if path.name in ("results.json", "pretrain_meta.json", "manifest.json"):  # what was hashed, to diff by eye
                (out / "stripped").mkdir(exist_ok=True)
                (out / "stripped" / "-".join(path.relative_to(out).parts)).write_bytes(data)
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
# the logged models (`harness export onnx` logs each bundle's ONNX models): by experiment, source run and
# name; not their random ids, times or artifacts (the same ONNX files as the bundles', under random ids)
models = {}
for model, experiment, name, status, kind, source in db.execute(
        "select m.model_id, e.name, m.name, m.status, m.model_type, m.source_run_id from logged_models m "
        "join experiments e using(experiment_id)"):
    models[model] = f"{experiment} | {names.get(source)} | model {name}"
    rows.append(f"{models[model]} status={status} type={kind}")
for model, key, value in db.execute("select model_id, param_key, param_value from logged_model_params"):
    rows.append(f"{models[model]} | param {key}={value}")
for model, key, value in db.execute(  # as runs' tags: not MLflow's own (mlflow.source.name names the checkout)
        "select model_id, tag_key, tag_value from logged_model_tags where tag_key not like 'mlflow.%'"):
    rows.append(f"{models[model]} | tag {key}={value}")
for model, key, value, step in db.execute(
        "select model_id, metric_name, metric_value, metric_step from logged_model_metrics"):
    rows.append(f"{models[model]} | metric {key}@{step}={value!r}")
print("\n".join(sorted(rows)))
PY
rm -rf "$FINAL"; cp -r "$OUT" "$FINAL"
cat "$FINAL/digest.txt"; wc -l "$FINAL/digest.txt" "$FINAL/mlflow.txt"
