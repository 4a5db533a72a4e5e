#!/usr/bin/env bash
# Fill .gpu/ (git-ignored) with what benchmarks/gpu_check.sh needs on the project's GPU image beside the
# checkout: wheels of the packages the image lacks (datasets and evaluate, with dill and multiprocess;
# MLflow and Optuna are not needed: the check runs with tracking off) and a slice of the shared data
# (STS-B, RTE and MRPC, one corpus shard, the vocabulary). About 20 MiB; run it here, then the device
# call names `.gpu` in its carry list. Versions are the ones this project's tests run with.
# `gpu_carry.sh small` (window B, gpu_check.sh small): three corpus shards, about 45 MiB of the 64 that
# travel; ~27M tokens, so its 9,000 steps of 16,384 tokens read the books about 5.5 times.
set -eu
shards=$([[ ${1:-} == small ]] && echo "00 01 02" || echo "00")
cd "$(dirname "$0")/.."
shared=${SHARED_DIR:-$(dirname "$PWD")/shared}
rm -rf .gpu
mkdir -p .gpu/wheels .gpu/shared/data/glue .gpu/shared/data/corpus/gutenberg .gpu/shared/models
# The image: Python 3.12 on x86-64 (no compiled wheels among these, but pip matches the tags anyway)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/wheels \
    datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 multiprocess==0.70.19
cp -r "$shared"/data/glue/{STS-B,RTE,MRPC} .gpu/shared/data/glue/
for shard in $shards; do
    cp "$shared/data/corpus/gutenberg/gutenberg-train-$shard.txt.gz" .gpu/shared/data/corpus/gutenberg/
done
cp -r "$shared"/models/electra-small-discriminator .gpu/shared/models/
ls .gpu/wheels
du -sh .gpu
