#!/usr/bin/env bash
# README's examples, one kind at a time, exactly as README writes them, from a checkout's root with
# ../shared beside it, offline (HF_HUB_OFFLINE=1): each block's time and exit status go to stderr.
# Used for reports/results/readme-examples.md; `bash reports/results/readme-examples.sh [KIND ...]`
# (glue squad text tagging pretrain grid python; default all), in the project's environment.
set -uo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
run() {  # one README block, its lines in order; stop the block at its first failure
    local kind=$1 start=$SECONDS status=0
    echo "== $kind" >&2
    python3 - "$kind" <<'PY' > "/tmp/readme-$kind.sh"
import sys
kind = sys.argv[1]
text = open("README.md").read()
heading = {"glue": "### GLUE", "squad": "### SQuAD", "text": "### Your own data", "tagging": "### Tagging",
           "pretrain": "### Pre-training", "grid": "## Beyond one machine", "python": "## From Python"}[kind]
block = text.split(heading, 1)[1]
fence = "```python" if kind == "python" else "```bash"
code = block.split(fence, 1)[1].split("```", 1)[0]
if kind == "python":
    print("python3 - <<'PYEOF'\n" + code + "PYEOF")
elif kind == "grid":  # the first line only: the Slurm and torchrun lines need a cluster and GPUs
    lines = code.strip().splitlines()
    print("\n".join(lines[:2]))
else:
    print(code)
PY
    bash -e "/tmp/readme-$kind.sh" || status=$?
    echo "== $kind: exit $status in $((SECONDS - start)) s" >&2
}
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(glue squad text tagging pretrain grid python)
for kind in "${kinds[@]}"; do run "$kind"; done
