#!/usr/bin/env bash
cd "$(dirname "$0")/../.."  # the repository root, with the harness installed; needs runs/demo from harness demo
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T=sqlite:///runs/lever/mlflow.db
harness pretrain --preset electra-tiny --corpus ../shared/data/corpus/gutenberg --output runs/lever/pretrain-mask25 \
  --max-flops 1e14 --tracking-uri $T optimizer=adamw mask_prob=0.25 cache_dir=runs/cache
harness run glue --model runs/lever/pretrain-mask25/discriminator --tasks sst2,stsb,rte --seeds 3 \
  --data-dir ../shared/data/glue --output-dir runs/lever/glue-mask25 --tracking-uri $T \
  max_train_examples=1500 predict_test=false
harness compare runs/lever/glue-mask25 runs/demo/glue/random-init
harness compare runs/lever/glue-mask25 runs/demo/glue/electra-1e+14
echo LEVER DONE
