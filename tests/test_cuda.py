"""The CUDA path on a real GPU: compiled and eager steps agree, CUDA graphs survive the padding buckets
and evaluation, resume is exact, a tiny GLUE and SQuAD run end to end, a GPU-trained model exports to
ONNX with parity, and `torchrun` starts a one-process run.

Every test here is marked `cuda` and skips without a GPU (conftest.py says why), so CI stays green on
CPU. On a machine with one:  python -m pytest -m cuda
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from harness.cli import main
from pretrain.train import pretrain
from tests.conftest import REPO, write_squad
from tests.pretrain_helpers import LAUNCHER, Killed, final_weights, killed_at, micro_config, pretrain_args
from tests.processes import child_env

pytestmark = pytest.mark.cuda

# bf16 on the GPU, as `auto` picks there; the tiny model's 64 positions, so four buckets of 16.
GPU = {"device": "cuda", "precision": "bf16"}
LOSSES = ("loss", "generator_loss", "discriminator_loss")


def tracking(tmp_path) -> str:
    """A SQLite MLflow store where MLflow is installed; `none` on an image without it (the GPU's)."""
    import importlib.util

    return f"sqlite:///{tmp_path / 'mlflow.db'}" if importlib.util.find_spec("mlflow") else "none"


def _logged(config) -> tuple[dict, list[dict]]:
    logged: list[dict] = []
    meta = pretrain(config, on_log=lambda step, metrics: logged.append(metrics))
    return meta, logged


def _long_pairs_glue(root):
    """An RTE folder whose pairs run from 10 to 59 tokens: batches fall in all four 16-token buckets."""
    import random

    rng = random.Random(0)
    folder = root / "RTE"
    folder.mkdir(parents=True)
    words = "the a cat dog sat ran on mat rug is was big small red blue".split()
    for split, n in (("train", 48), ("dev", 24)):
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            label = ("entailment", "not_entailment")[i % 2]
            mood = "happy" if i % 2 == 0 else "sad"
            length = rng.randint(1, 50)  # with the rest of the pair and [CLS]/[SEP]: 10 to 59 tokens
            first = " ".join(rng.choice(words) for _ in range(length)) + f" {mood} ."
            rows.append(f"{i}\t{first}\tit is {mood} .\t{label}")
        (folder / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    (folder / "test.tsv").write_text("index\tsentence1\tsentence2\n0\tthe cat sat .\tit is .\n")
    return root


def _finetune_on_gpu(tiny_model, glue, compile_setting: str):
    import transformers

    from tasks import batching
    from tasks import glue as glue_tasks
    from tasks.config import FinetuneConfig
    from tasks.finetune import LoopIO, finetune
    from tasks.glue_data import load_glue
    from tasks.registry import GLUE_TASKS

    task = GLUE_TASKS["rte"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue_tasks.build_task(task, load_glue(task, glue), tokenizer, max_length=64)
    config = FinetuneConfig(precision="bf16", compile=compile_setting, batch_size=8, max_length=64,
                            num_epochs=3, learning_rate=2e-3).resolved("small", 1)
    transformers.set_seed(0)
    model = glue_tasks.load_model(str(tiny_model), task, attn_implementation="sdpa").to("cuda")
    return finetune(model, built, config, batching.collator(tokenizer), LoopIO(progress=False)), built


def test_cuda_graphs_survive_the_padding_buckets_and_evaluation(tiny_model, tmp_path):
    """Three epochs, each followed by a dev pass, over batches of every bucket length: the compiled
    model (CUDA graph trees) trains and predicts as the eager one does, and compiles a few graphs only."""
    from torch._dynamo.utils import counters

    glue = _long_pairs_glue(tmp_path / "glue")
    results = {}
    for setting in ("off", "on"):
        counters.clear()
        results[setting], built = _finetune_on_gpu(tiny_model, glue, setting)
        if setting == "on":
            graphs = counters["stats"]["unique_graphs"]
            assert 0 < graphs <= 16, f"{graphs} graphs compiled: shapes are not bucketed"
    lengths = {len(ids) for ids in built.train["input_ids"]}
    assert min(lengths) <= 16 and max(lengths) > 48  # every bucket was used
    eager, compiled = results["off"], results["on"]
    assert [r["train_loss"] for r in compiled.history] == pytest.approx(
        [r["train_loss"] for r in eager.history], rel=2e-2)
    np.testing.assert_allclose(np.stack(compiled.outputs["validation"]), np.stack(eager.outputs["validation"]),
                               atol=0.05)


def _gpu_glue_run(tiny_model, glue_data, tmp_path):
    args = ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte,stsb",
            "--output-dir", str(tmp_path / "glue"), "--tracking-uri", tracking(tmp_path),
            "--seeds", "2", "num_epochs=2", "batch_size=8"]
    assert main(args) == 0
    return json.loads((tmp_path / "glue" / "results.json").read_text())


def test_tiny_glue_run_end_to_end_then_onnx_parity(tiny_model, glue_data, tmp_path):
    """`harness run glue` with its GPU defaults (bf16, compiled), then `harness export onnx` of a seed
    trained on the GPU: the bundle's outputs match the model's on the CPU."""
    results = _gpu_glue_run(tiny_model, glue_data, tmp_path)
    assert [(r["task"], r["seed"]) for r in results["runs"]] == [("stsb", 0), ("stsb", 1), ("rte", 0), ("rte", 1)]
    assert (results["precision"], results["compile"]) == ("bf16", "on") and results["accelerator"] != "cpu"
    _scores_are_their_predictions(tmp_path / "glue", results)
    code = main(["export", "onnx", "--run", str(tmp_path / "glue"), "--task", "stsb",
                 "--data-dir", str(glue_data), "--tracking-uri", tracking(tmp_path)])
    assert code == 0
    stsb = [r for r in results["runs"] if r["task"] == "stsb"]
    best = max(stsb, key=lambda r: r["score"])["seed"]  # the seed export takes: the best dev score
    (bundle,) = (tmp_path / "glue" / "onnx").glob("*/manifest.json")
    assert bundle.parent.name == f"stsb-seed{best}"
    manifest = json.loads(bundle.read_text())
    assert manifest["parity"]["examples"] == 8 and manifest["parity"]["max_abs_diff"] <= 1e-4


def _scores_are_their_predictions(run_dir, results) -> None:
    """Each seed's reported dev score is the score of the dev predictions it saved, recomputed here: RTE's
    accuracy, STS-B's Spearman correlation (nan where a seed predicts one value: nan_ok)."""
    from scipy.stats import spearmanr

    for record in results["runs"]:
        path = run_dir / "predictions" / f"{record['task']}-seed{record['seed']}" / "dev_outputs.json"
        split = json.loads(path.read_text())["splits"]["validation"]
        predictions, references = np.array(split["predictions"]), np.array(split["references"])
        assert len(predictions) == len(references) == 8
        reported = record["metrics"]["validation"]
        if record["task"] == "rte":
            assert reported["accuracy"] == pytest.approx(float(np.mean(predictions == references)))
        else:
            expected = spearmanr(predictions, references).statistic
            assert reported["spearman"] == pytest.approx(float(expected), nan_ok=True)


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_tiny_squad_run_end_to_end(tiny_model, tmp_path, version):
    data = tmp_path / "squad"
    write_squad(data / f"dev-v{version}.json", version)
    args = ["run", "squad", "--model", str(tiny_model), "--output-dir", str(tmp_path / "out"),
            "--tracking-uri", tracking(tmp_path), "--version", version, "--data-dir", str(data),
            "max_length=64", "doc_stride=16", "max_query_length=16", "batch_size=8", "num_epochs=2"]
    assert main(args) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert (results["precision"], results["compile"]) == ("bf16", "on") and results["accelerator"] != "cpu"
    _squad_scores_are_their_predictions(tmp_path / "out", results, version)


def _squad_scores_are_their_predictions(out, results, version: str) -> None:
    """Every held-out question has a predicted answer, and the per-question F1s saved beside them average
    to the F1 the run reports."""
    task = "squad" if version == "1.1" else "squad_v2"
    stem = out / "predictions" / f"{task}-seed0"
    predictions = json.loads((stem / "predictions.json").read_text())
    assert len(predictions) == results["data"]["num_dev_examples"] > 0
    per_question = json.loads((stem / "dev_outputs.json").read_text())["splits"]["validation"]["scores"]["f1"]
    assert len(per_question) == len(predictions)
    assert sum(per_question) / len(per_question) == pytest.approx(results["runs"][0]["metrics"]["validation"]["f1"])


def test_compiled_and_eager_pretraining_agree_in_bf16(tmp_path, micro, corpus):
    """The same seed gives the same losses compiled (CUDA graphs) and eager, within bf16 rounding."""
    runs = {}
    for setting in ("off", "on"):
        meta, runs[setting] = _logged(micro_config(tmp_path, corpus, name=setting, compile=setting,
                                                   max_steps=8, log_every_steps=2, **GPU))
        assert (meta["device"], meta["precision"], meta["compiled"]) == ("cuda", "bf16", setting == "on")
    # bf16 keeps 8 significant bits (a relative step of 2^-8 = 0.4%), and inductor fuses and reorders
    # the sums that eager runs kernel by kernel: the two agree to a few bf16 steps, drifting apart over
    # the steps as their weights do, so 1e-3 would fail on rounding alone. 2% still catches a wrong
    # mask, loss or update, which moves these losses by far more.
    for key in LOSSES:
        assert [m[key] for m in runs["on"]] == pytest.approx([m[key] for m in runs["off"]], rel=2e-2), key


def _max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0 for k in a)


# fp16 (GPUs without bf16) resumes its gradient scaler's state too; eager, to keep its compile out of the
# GPU window (compiled resume is the bf16 case's).
@pytest.mark.parametrize("precision,compile_setting", [("bf16", "on"), ("fp16", "off")])
def test_resume_after_a_kill_matches_an_uninterrupted_run(tmp_path, micro, corpus, precision, compile_setting):
    """Killed after the step-5 checkpoint and resumed, a run ends where an unbroken one does: bit for
    bit where the GPU repeats itself bit for bit, else no further off than two unbroken runs are from
    each other (atomic adds in some CUDA backward kernels sum in any order)."""
    settings = {"max_steps": 12, "checkpoint_every_steps": 5, "compile": compile_setting,
                "device": "cuda", "precision": precision}
    for name in ("whole", "again"):
        pretrain(micro_config(tmp_path, corpus, name, **settings))
    broken = micro_config(tmp_path, corpus, "broken", log_every_steps=1, **settings)
    with pytest.raises(Killed):
        pretrain(broken, on_log=killed_at(7))
    pretrain(broken)
    whole, again, resumed = (final_weights(tmp_path / name) for name in ("whole", "again", "broken"))
    repeat = _max_difference(whole, again)
    assert _max_difference(whole, resumed) <= 2 * repeat, f"unbroken runs differ by {repeat}"


def _pretrain_args(tmp_path, corpus, extra, name: str) -> list[str]:
    args = pretrain_args(tmp_path, corpus, *extra, name=name)
    args[args.index("--tracking-uri") + 1] = tracking(tmp_path)
    return args


def test_torchrun_one_process_pretrains_as_a_plain_run(tmp_path, micro, corpus):
    """`torchrun --nproc_per_node=1` (a one-GPU machine) runs the command and ends on the same tokens,
    FLOPs and losses as the same command without it."""
    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER)
    extra = ("max_steps=6", "batch_size=8", "device=cuda", "compile=off")  # fp32: cli_args sets it
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1", "--standalone",
                             str(script), *_pretrain_args(tmp_path, corpus, extra, "torchrun")],
                            cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert main(_pretrain_args(tmp_path, corpus, extra, "plain")) == 0
    launched, plain = (json.loads((tmp_path / name / "pretrain_meta.json").read_text())
                       for name in ("torchrun", "plain"))
    assert launched["device"] == plain["device"] == "cuda"
    assert (launched["tokens_seen"], launched["train_flops"]) == (plain["tokens_seen"], plain["train_flops"])
    assert launched["metrics"]["generator_loss"] == pytest.approx(plain["metrics"]["generator_loss"], rel=1e-3)
