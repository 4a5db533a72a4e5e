"""benchmarks/gpu_check.sh on its `micro` plan: both parts run on the CPU through the code paths the GPU
window runs (the same scripts, the same `harness demo` GPU plan at micro sizes, MLflow and Optuna
unimportable as on the image), so the prepared check cannot rot between windows.

The data are made here (a SHARED_DIR of tiny GLUE folders, a corpus and the tiny model's vocabulary),
so the rehearsal runs without the real shared data too.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, _sentences, write_corpus, write_glue_dir

SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
MAX_FILES, MAX_BYTES = 8, 16 * 2 ** 20  # what comes back from the device machine's $OUT


@pytest.fixture(scope="module")
def rehearsal_shared(tiny_model, tmp_path_factory):
    """A SHARED_DIR with STS-B, RTE and MRPC, a corpus and a vocabulary, in the layouts of the real one."""
    root = tmp_path_factory.mktemp("shared")
    glue = write_glue_dir(root / "data" / "glue")
    mrpc = glue / "MRPC"
    mrpc.mkdir()
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"  # the real files' byte-order mark
    for split, n, seed in (("train", 16, 6), ("dev", 8, 7)):
        rows = [f"{y}\t{i}\t{i + 1000}\t{a}\t{b}" for i, (a, b, y) in enumerate(_sentences(n, seed))]
        (mrpc / f"{split}.tsv").write_text("\n".join([header, *rows]) + "\n")
    corpus = root / "data" / "corpus" / "gutenberg"
    corpus.mkdir(parents=True)
    write_corpus(corpus / "corpus.txt", documents=200)
    shutil.copytree(tiny_model, root / "models" / "electra-small-discriminator")
    return root


def check(part: str, shared, out, work) -> tuple[str, str]:
    """Run one part of the micro plan; its stdout and summary.txt. $OUT as on the device machine."""
    env = {**os.environ, "SHARED_DIR": str(shared), "OUT": str(out), "GPU_CHECK_WORK": str(work)}
    done = subprocess.run(["bash", str(SCRIPT), part, "micro"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(out.iterdir())
    assert len(files) <= MAX_FILES and all(f.is_file() and f.stat().st_size < MAX_BYTES for f in files)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f.name) for f in files)
    summary = (out / "summary.txt").read_text()
    assert done.stdout.endswith(summary)  # the summary is printed last
    return done.stdout, summary


def cuda_tests() -> int:
    """How many tests tests/test_cuda.py holds, a parametrized one once per case, read from its source."""
    count = 0
    for node in ast.parse((REPO / "tests" / "test_cuda.py").read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            cases = 1
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("parametrize"):
                    cases *= len(ast.literal_eval(decorator.args[1]))
            count += cases
    return count


# Slow tier, over 30 s: the only run of the GPU check's core part, the script the GPU window runs first.
@pytest.mark.slow
def test_core_part_on_the_micro_plan(rehearsal_shared, tmp_path):
    out = tmp_path / "out"
    _, summary = check("core", rehearsal_shared, out, tmp_path / "work")
    for part in ("environment", "pytest -m cuda", "pre-training step", "fine-tuning vs Trainer"):
        assert f"[{part}] ok in " in summary, summary
    # "ok" alone is a run of skips on a CPU: every test of tests/test_cuda.py must be collected and skip
    # for the missing GPU only; one that skips for another reason (an import the image lacks), is
    # deselected or errors would not run on the GPU either.
    ran = (out / "core-pytest.txt").read_text()
    skips = re.findall(r"^SKIPPED \[(\d+)\] [^:]+(?::\d+)?: (.*)$", ran, re.M)
    assert re.search(rf"^{cuda_tests()} skipped in ", ran, re.M), ran[-3000:]
    assert sum(int(n) for n, _ in skips) == cuda_tests(), ran[-3000:]
    assert all(reason.startswith("needs a CUDA GPU") for _, reason in skips), skips
    assert "package mlflow: " in summary and "import of mlflow halted" in summary  # the image rehearsed
    assert re.search(r"ceiling: \S+ matmul fp32 256\^3 [0-9.e+-]+ TFLOP/s \(host clock\)", summary)
    assert re.search(r"electra/mlm step-time ratio, eager: [0-9.]+", summary)
    # 2 steps of 32 from 16 MRPC pairs: the training set repeats instead of running out
    assert "ELECTRA-Tiny shape, MRPC, batch 32, 2 steps" in summary
    assert re.search(r"ours defaults \((?:fp32|bf16|fp16), compile auto\) +[0-9.]+ +[0-9.]+x", summary)
    assert sorted(f.name for f in out.iterdir()) == ["core-env.txt", "core-finetune.txt", "core-pretrain.txt",
                                                      "core-pytest.txt", "summary.txt"]


# Slow tier, over 30 s: the only run of the GPU check's demo part, the GPU window's second call.
@pytest.mark.slow
def test_demo_part_on_the_micro_plan_runs_the_gpu_plans_stages(rehearsal_shared, tmp_path):
    out = tmp_path / "out"
    _, summary = check("demo", rehearsal_shared, out, tmp_path / "work")
    assert "[harness demo (micro plan)] ok in " in summary, summary
    demo = json.loads((out / "demo.json").read_text())
    assert demo["plan"]["tasks"] == "stsb,rte,mrpc" and demo["plan"]["seeds"] == 3  # the GPU plan's
    assert demo["plan"]["machine"] == "gpu (micro rehearsal)"
    rows = {line.split("|")[0].strip() for line in demo["comparison"].splitlines() if line.count("|") > 5}
    assert {"mrpc", "stsb", "rte", "GLUE"} <= rows
    assert "GLUE | paper convention |" in summary and "better model: " in summary
    assert sorted(f.name for f in out.iterdir()) == ["demo-log.txt", "demo.json", "efficiency.md", "summary.txt"]


def test_parts_named_in_gpu_check_skip_are_reported_skipped(tmp_path):
    """A short window can leave out what an earlier one measured: GPU_CHECK_SKIP's parts (commas or
    spaces between them) are listed as skipped and leave no file. (That a part not named runs is the
    core test's: there nothing is named.)"""
    out = tmp_path / "out"
    env = {**os.environ, "SHARED_DIR": str(tmp_path), "OUT": str(out), "GPU_CHECK_WORK": str(tmp_path / "work"),
           "GPU_CHECK_SKIP": "env,pytest,pretrain finetune"}
    done = subprocess.run(["bash", str(SCRIPT), "core", "micro"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = (out / "summary.txt").read_text()
    for part in ("environment", "pytest -m cuda", "pre-training step", "fine-tuning vs Trainer"):
        assert f"[{part}] skipped (GPU_CHECK_SKIP)" in summary, summary
    assert [f.name for f in out.iterdir()] == ["summary.txt"]


def test_the_live_plugin_prints_a_failure_as_its_test_ends(tmp_path):
    """benchmarks/pytest_live.py: a failing test's traceback comes before the next test runs, so a run
    killed at the GPU check's limit keeps it."""
    (tmp_path / "test_two.py").write_text(
        "import sys\n\ndef test_fails():\n    assert 1 + 1 == 3, 'arithmetic'\n\n"
        "def test_then():\n    print('SECOND RUNNING', file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "-p", "benchmarks.pytest_live", str(tmp_path / "test_two.py")],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    live = done.stderr
    assert re.search(r"\[live\] \S*test_two.py::test_fails: FAILED in [0-9.]+s", live), live
    assert live.index("arithmetic") < live.index("SECOND RUNNING"), live  # before the next test starts
    assert re.search(r"\[live\] \S*test_two.py::test_then: PASSED", live), live


# Slow tier: the only run of window B's part (the GPU issue's pre-training of ELECTRA-Small), the whole
# of that window's one command, and of the unpacking the CPU fine-tunes from.
@pytest.mark.slow
def test_small_part_packs_both_discriminators_into_what_comes_back(rehearsal_shared, tmp_path):
    import torch
    import transformers
    from safetensors.torch import load_file

    out, work = tmp_path / "out", tmp_path / "work"
    _, summary = check("small", rehearsal_shared, out, work)
    assert "[ELECTRA-Small, window B (micro plan)] ok in " in summary, summary
    # the corpus prepared before the loop's clock was set: the pre-training found it cached
    log = (out / "small-log.txt").read_text()
    assert re.search(r"corpus prepared: [0-9,]+ sequences in \d+ s", log), log[-2000:]
    assert "the loop's guard: max_time_s=120 " in log, log[-2000:]
    names = sorted(f.name for f in out.iterdir())
    assert names == ["small-curve.tsv", "small-final-model.safetensors", "small-half-model.safetensors",
                     "small-log.txt", "small-meta.tar.gz", "summary.txt"], names
    assert all(t.dtype == torch.float16 for t in load_file(out / "small-final-model.safetensors").values())
    # the probe every 1% of a 40-step budget: a row every 2 steps (the log interval), AUC in [0, 1]
    rows = [line.split("\t") for line in (out / "small-curve.tsv").read_text().splitlines()[1:]]
    assert [int(r[0]) for r in rows] == list(range(2, 41, 2))
    assert all(0.0 <= float(r[1]) <= 1.0 for r in rows)
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_small.py"), "unpack", str(out),
                    str(tmp_path / "models")], cwd=REPO, check=True, capture_output=True, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    trained = transformers.AutoModelForPreTraining.from_pretrained(work / "small" / "electra-small" / "discriminator")
    for name, step in (("final", 40), ("half", 20)):
        folder = tmp_path / "models" / name
        assert json.loads((folder / "pretrain_meta.json").read_text())["steps"] == step
        model = transformers.AutoModelForPreTraining.from_pretrained(folder)
        assert model.dtype == torch.float32 and (folder / "tokenizer.json").is_file()
        if name == "final":  # the run's own discriminator, to fp16's precision
            for (key, value), original in zip(model.state_dict().items(), trained.state_dict().values(),
                                              strict=True):
                assert torch.allclose(value, original, rtol=1e-3, atol=1e-4), key


def test_the_small_parts_guard_is_what_the_limit_leaves_after_the_preparation():
    from benchmarks.gpu_small import guard

    assert guard("gpu", 30.0) == 420  # a quick preparation: the loop's planned share
    assert guard("gpu", 200.4) == 324  # a slow one: the limit less the packing's reserve, floored
    assert guard("gpu", 540.0) == 1  # nothing left: one step, then the packing, inside the limit
    assert guard("micro", 0.0) == 120
