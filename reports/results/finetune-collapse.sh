#!/usr/bin/env bash
# Issue 22 item 1: what makes the demo's pre-trained model stay at SST-2's majority class?
set -u
cd "$(dirname "$0")/../.."  # the repository root, with the harness installed
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T=sqlite:///runs/item1/mlflow.db
G=../shared/data/glue
harness pretrain --preset electra-tiny --corpus ../shared/data/corpus/gutenberg --output runs/item1/pretrain \
  --max-flops 1e14 --tracking-uri $T optimizer=adamw cache_dir=runs/cache
ft() {  # name model settings...
  local name=$1 model=$2; shift 2
  harness run glue --model $model --tasks sst2 --seeds 3 --data-dir $G --output-dir runs/item1/$name \
    --tracking-uri $T max_train_examples=1500 predict_test=false save_models=false "$@"
}
ft pre-base runs/item1/pretrain/discriminator
harness init --preset electra-tiny --tokenizer runs/item1/pretrain/discriminator --output runs/item1/random --keep-existing
ft ctl-base runs/item1/random
ft pre-mean runs/item1/pretrain/discriminator loss_reduction=mean
ft ctl-mean runs/item1/random loss_reduction=mean
ft pre-adamw runs/item1/pretrain/discriminator optimizer=adamw
ft pre-reinit1 runs/item1/pretrain/discriminator reinit_layers=1
ft pre-lr1e-3 runs/item1/pretrain/discriminator learning_rate=1e-3
ft pre-lr1e-4 runs/item1/pretrain/discriminator learning_rate=1e-4
ft pre-warm0 runs/item1/pretrain/discriminator warmup_fraction=0.0
ft pre-hf runs/item1/pretrain/discriminator head=hf
ft pre-ep10 runs/item1/pretrain/discriminator num_epochs=10
ft ctl-ep10 runs/item1/random num_epochs=10
ft pre-reinit2 runs/item1/pretrain/discriminator reinit_layers=2
ft pre-reinit4 runs/item1/pretrain/discriminator reinit_layers=4
# Later checks (2026-11-24) on the demo's own checkpoint (runs/demo from `harness demo`), vs its control:
D=runs/demo/pretrain/electra-1e+14/discriminator
ft demo-nodecay $D layerwise_lr_decay=1.0
ft demo-nodecay-lr1e-3 $D layerwise_lr_decay=1.0 learning_rate=1e-3
mkdir -p runs/item1/demo-nodrop && cp $D/* runs/item1/demo-nodrop/ && python - <<'PY'
import json; path = "runs/item1/demo-nodrop/config.json"; config = json.load(open(path))
config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0); json.dump(config, open(path, "w"), indent=2)
PY
ft demo-nodrop runs/item1/demo-nodrop
# every layer re-initialised, the demo's embeddings kept, on all three of the demo's tasks (2026-11-24, two threads):
harness run glue --model $D --tasks sst2,stsb,rte --seeds 3 --data-dir $G --output-dir runs/item1/demo-reinit4 \
  --tracking-uri $T max_train_examples=1500 predict_test=false save_models=false reinit_layers=4
harness compare runs/item1/demo-reinit4 runs/demo/glue/random-init
for name in demo-nodecay demo-nodecay-lr1e-3 demo-nodrop; do harness compare runs/item1/$name runs/demo/glue/random-init --tasks sst2; done
# The gradient, traced (one seed each):
for model in runs/demo/random-init runs/lever/pretrain-mlm/discriminator $D runs/lever/pretrain-batch8/discriminator \
    runs/lever/pretrain-temp2/discriminator; do python scripts/finetune_trace.py $model 2>/dev/null; done
echo ALL DONE
