"""How many steps before an objective starts using context: MLM against replaced token detection.

Each paragraph of a synthetic corpus is eight random words followed by the same eight words, so a
masked or replaced word can be told from its copy eight positions away and from nothing else:
before a model attends to the copy, MLM sits at the unigram loss ln(V) and the discriminator at
chance (AUC 0.5). The script pre-trains a 2-layer, 64-wide model with `harness pretrain` on it
for each objective and prints, every `--every` steps, the MLM loss (or the generator loss) and the
discriminator's replaced-token AUC and accuracy, then the first step at which each objective
clearly left its plateau. It isolates the objective's learning dynamics from the corpus.

    OMP_NUM_THREADS=1 python benchmarks/copy_task_probe.py --steps 3000 --learning-rate 1e-3
    OMP_NUM_THREADS=1 python benchmarks/copy_task_probe.py --objectives electra --batch-size 64 seed=1
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from foundation.models.presets import PRESETS, ModelPreset
from foundation.models.shapes import TransformerShape
from harness.cli import main as harness

PROBE = ModelPreset("copy-probe", "electra", "small",
                    TransformerShape(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
                                     embedding_size=64), pretrain_batch_size=32, pretrain_seq_len=64,
                    max_position_embeddings=128)
WORDS = 300
MLM_LEFT = 3.0  # nats: far below ln(300) = 5.7, the unigram plateau
AUC_LEFT = 0.8


def write_corpus(path: Path, paragraphs: int = 3000, seed: int = 0) -> None:
    rng = random.Random(seed)
    words = [f"w{i}x" for i in range(WORDS)]
    with open(path, "w") as handle:
        for _ in range(paragraphs):
            first = [rng.choice(words) for _ in range(8)]
            handle.write(" ".join(first + first) + "\n\n")


def read_metrics(uri: str, run_name: str) -> dict[int, dict[str, float]]:
    """Every logged metric of the newest run called `run_name`, by step."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(experiments, f"attributes.run_name = '{run_name}'",
                                order_by=["attributes.start_time DESC"], max_results=1)
    metrics: dict[int, dict[str, float]] = {}
    for key in run.data.metrics:
        for entry in client.get_metric_history(run.info.run_id, key):
            metrics.setdefault(entry.step, {})[key] = entry.value
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=PROBE.pretrain_batch_size)
    parser.add_argument("--objectives", default="mlm,electra")
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="more `harness pretrain` settings")
    args = parser.parse_args()

    PRESETS[PROBE.name] = PROBE
    work = Path(tempfile.mkdtemp(prefix="copy-probe-"))
    write_corpus(work / "corpus.txt")
    uri = f"sqlite:///{work / 'mlflow.db'}"
    left = {}
    for objective in args.objectives.split(","):
        code = harness(["pretrain", "--preset", PROBE.name, "--corpus", str(work / "corpus.txt"),
                        "--output", str(work / objective), "--objective", objective,
                        "--tracking-uri", uri, f"max_steps={args.steps}",
                        f"learning_rate={args.learning_rate}", f"batch_size={args.batch_size}",
                        "warmup_fraction=0.1", "tokenizer=train", "train_vocab_size=400", "precision=fp32",
                        f"cache_dir={work / 'cache'}",
                        "log_every_steps=50", *args.overrides])
        if code:
            raise SystemExit(code)
        metrics = read_metrics(uri, objective)
        print(f"\n{objective}, lr {args.learning_rate:g}, batch {args.batch_size}:")
        for step in sorted(metrics):
            row = metrics[step]
            loss = row.get("mlm_loss", row.get("generator_loss"))
            if step % args.every == 0:
                detection = ""
                if "disc_auc" in row:
                    auc, accuracy = row["disc_auc"], row["disc_accuracy_replaced"]
                    detection = f"  disc AUC {auc:.3f}  replaced acc {accuracy:.3f}"
                name = "mlm" if objective == "mlm" else "generator"
                print(f"  step {step:6d}  {name} loss {loss:.3f}{detection}")
            done = row.get("disc_auc", 0.0) >= AUC_LEFT if "disc_auc" in row else loss <= MLM_LEFT
            if done and objective not in left:
                left[objective] = step
    print()
    for objective in args.objectives.split(","):
        what = f"disc AUC >= {AUC_LEFT}" if objective != "mlm" else f"MLM loss <= {MLM_LEFT}"
        print(f"{objective}: left the plateau ({what}) at step {left.get(objective, 'never')} "
              f"of {args.steps}")


if __name__ == "__main__":
    main()
