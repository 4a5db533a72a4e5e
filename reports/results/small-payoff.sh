#!/usr/bin/env bash
# Window B of the GPU issue, its CPU half (small-payoff.md): ELECTRA-Small pre-trained for one GPU window
# (benchmarks/gpu_check.sh small, benchmarks/gpu_small.py), fine-tuned with ELECTRA's recipe on the main
# job's tasks and subsets (SST-2, STS-B, RTE; 1,500 training examples each; 3 seeds) beside random weights
# of the same shape and vocabulary, then `harness compare`. Fixed before the window's model exists.
#
#   bash reports/results/small-payoff.sh control     # the control, once (kept in small-payoff/random-init)
#   bash reports/results/small-payoff.sh window OUT  # OUT: the files `gpu_check.sh small gpu` brought back
#
# Needs the harness installed; the local pool runs one unit a core (2 cores: ~35 min an arm).
set -e
cd "$(dirname "$0")/../.."  # the repository root
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
shared=${SHARED_DIR:-../shared}
runs=runs/small-payoff
kept=reports/results/small-payoff

glue() {  # glue MODEL OUTPUT: the arm's fine-tunings, resumed where a rerun finds them
    harness run glue --model "$1" --tasks sst2,stsb,rte --seeds 3 --data-dir "$shared/data/glue" \
        --output-dir "$2" --tracking-uri none --executor local \
        max_train_examples=1500 predict_test=false save_models=false
}

keep() {  # keep RUN NAME: what `harness compare` and `harness report` read, without the grid's files
    rm -rf "${kept:?}/$2"
    mkdir -p "$kept/$2"
    cp "$1/results.json" "$kept/$2/"
    cp -r "$1/predictions" "$kept/$2/"
}

case ${1:-} in
control)
    harness init --preset electra-small --tokenizer "$shared/models/electra-small-discriminator" \
        --output $runs/models/random-init --keep-existing
    glue $runs/models/random-init $runs/glue/random-init
    keep $runs/glue/random-init random-init
    ;;
window)
    [[ -f ${2:-}/small-meta.tar.gz ]] || { echo "usage: $0 window OUT (OUT holds small-meta.tar.gz)" >&2; exit 2; }
    python benchmarks/gpu_small.py unpack "$2" $runs/models  # $runs/models/final and /half, fp32
    mkdir -p "$kept"
    cp "$2/small-curve.tsv" "$kept/"
    for arm in final half; do  # the final model is the question; the halfway one says how the curve went
        [[ -d $runs/models/$arm ]] || { echo "no $arm discriminator came back: skipped"; continue; }
        glue $runs/models/$arm $runs/glue/$arm
        keep $runs/glue/$arm $arm
        harness compare $kept/$arm $kept/random-init | tee "$kept/compare-$arm.txt"
    done
    ;;
*)
    echo "usage: $0 control | window OUT" >&2
    exit 2
    ;;
esac
