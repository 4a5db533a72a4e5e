"""`harness demo`: the whole pipeline on a micro plan, its closing summary, its ETA, and its resume."""

from __future__ import annotations

import dataclasses
import json

import pytest

from foundation.infra.errors import UserError
from harness.cli import main
from harness.experiments import demo
from tests.conftest import MICRO, write_corpus
from tests.fixtures_processes import mlflow_store_copy


@pytest.fixture
def micro_plan(micro, monkeypatch, tmp_path, tiny_model):
    # the published act's encoder: the tiny checkpoint (the real one, minilm-l6, is
    # tests/test_published_model.py's), on one task beside the arms' (rte) and one of its own (cola)
    plan = dataclasses.replace(
        demo.CPU, preset=MICRO.name, budget_flops=2e8, seeds=2, tasks="stsb,rte", train_examples=12,
        pretrain_settings=("tokenizer=train", "train_vocab_size=200", "precision=fp32",
                           f"cache_dir={tmp_path / 'cache'}"),
        finetune_settings=("predict_test=false", "num_epochs=1", "batch_size=8", "precision=fp32"),
        published=str(tiny_model), published_tasks="rte,cola", published_train_examples=10, export_task="rte",
        example=("the cat sat on the mat .", "a cat sat ."))
    monkeypatch.setattr(demo, "CPU", plan)
    return plan


# Slow tier, over 30 s: the only end-to-end run of `harness demo` (pre-training, two arms, compare,
# report, export, a torch-free prediction) and of its resume.
@pytest.mark.slow
def test_demo_runs_the_pipeline_and_resumes(micro_plan, glue_data, tmp_path, capsys, tmp_path_factory):
    corpus = write_corpus(tmp_path / "corpus.txt")
    mlflow_store_copy(tmp_path_factory, tmp_path / "mlflow.db")  # made once: creating one takes seconds
    out = tmp_path / "demo"
    args = ["demo", "--device", "cpu", "--output", str(out), "--data-dir", str(glue_data), "--corpus", str(corpus),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    # The subsampling is said up front, and the leaderboard keeps these rows apart from the recipe's.
    assert "(training sets subsampled to 12 examples each to fit the half hour, a departure from the recipe " \
           f"that the leaderboard marks; full dev sets, 2 seeds), the published encoder {micro_plan.published} on " \
           "rte,cola (10 training examples), compare" in printed.splitlines()[0]
    assert "[departs: batch_size=8, max_train_examples=12, num_epochs=1]" in (out / "report" / "leaderboard.md").read_text()
    summary = json.loads((out / "demo.json").read_text())
    # Both arms fine-tuned on the plan's tasks and seeds, without test-set prediction.
    for arm in ("electra-2e+08", "random-init"):
        results = json.loads((out / "glue" / arm / "results.json").read_text())
        assert {(r["task"], r["seed"], r["num_train_examples"]) for r in results["runs"]} == {
            (t, s, n) for t, n in (("stsb", 24), ("rte", 12)) for s in (0, 1)}  # 12 of 16; STS-B both orders
        assert not list((out / "glue" / arm / "predictions").glob("*/test.tsv"))
    # The detector's AUC on the fixed corruption source, where pre-training ended.
    assert set(summary["detector"]) == {"disc_auc", "disc_auc_unigram", "position_cosine"}
    assert f"encoder collapse: positions' mean cosine {summary['detector']['position_cosine']:.2f}" in printed
    assert f"end of pre-training: replaced-token AUC {summary['detector']['disc_auc_unigram']:.3f} on a fixed " \
           "unigram corruption" in printed
    # The side-by-side table, harness compare's verdict, the export and one real prediction.
    assert "| random-init |" in printed and "| electra |" in printed
    assert "harness compare (A = pre-trained, B = control):" in printed and "verdict" in printed
    # The published act: its run beside the arms', the three models in one table, compared on their common task.
    published = json.loads((out / "glue" / "tiny" / "results.json").read_text())
    assert {(r["task"], r["seed"], r["num_train_examples"]) for r in published["runs"]} == {
        (t, s, 10) for t in ("rte", "cola") for s in (0, 1)}
    table = summary["published"]["table"].splitlines()
    assert table[0] == "| model | CoLA (mcc) | STS-B (spearman) | RTE (accuracy) | training examples | seeds |"
    assert [row.split(" | ")[0] for row in table[2:]] == ["| random-init", "| electra (pre-trained)",
                                                          f"| {micro_plan.published}"]
    assert table[2].split(" | ")[1] == "" and table[4].split(" | ")[2] == ""  # a task it did not train: blank
    assert [line.split(" ")[0] for line in summary["published"]["comparison"].splitlines()[2:4]] == ["rte", "GLUE"]
    assert f"harness compare (A = {micro_plan.published}, B = pre-trained, on the tasks both trained):" in printed
    assert f"| {micro_plan.published} [departs: " in (out / "report" / "leaderboard.md").read_text()  # beside the arms'
    # Exported: the published encoder's best seed of the plan's task, int8, answering with a label and
    # its probabilities.
    bundle = out / "onnx" / "tiny-rte"
    assert "model.int8.onnx" in json.loads((bundle / "manifest.json").read_text())["files"]
    assert f"exported: {micro_plan.published}'s best RTE seed, int8: ONNX bundle {bundle}" in printed
    assert set(summary["prediction"]["output"]) == {"label", "probability", "probabilities"}
    # "better" only as harness compare's GLUE verdict has it; the published encoder exported either way,
    # and no line says an arm was
    glue_row = next(line for line in summary["comparison"].splitlines() if line.startswith("GLUE"))
    assert summary["glue_verdict"] in glue_row
    if summary["glue_verdict"].startswith("no detectable"):
        assert summary["better"] is None
        assert "better model: neither (no detectable difference at this sample size, p = " in printed
    else:
        assert f"better model: {summary['better']} (" in printed
    assert summary["exported"] == "tiny" and "exported the higher GLUE median" not in printed
    assert summary["bundle"] == str(bundle) and (bundle / "manifest.json").is_file()
    # the bundle's own score for the plan's example pair, in this process: the prediction is that pair's
    from harness.deploy.onnx_predictor import Predictor, Request

    (expected,) = Predictor(bundle).predict([Request(*micro_plan.example)])
    assert summary["prediction"]["output"]["probabilities"] == pytest.approx(expected["probabilities"], abs=1e-6)
    assert summary["prediction"]["command"].startswith(f"harness predict --bundle {bundle} ")
    assert (out / "report" / "leaderboard.html").is_file() and (out / "efficiency.png").is_file()
    # Each stage says how long the demo has run and how long is left; the end says where things are.
    assert printed.count(" elapsed, about ") == 5
    assert [line.split("]")[0] for line in printed.splitlines() if " elapsed, about " in line] == [
        "[1/5", "[2/5", "[3/5", "[4/5", "[5/5"]  # every stage numbered, the demo's own last ones too
    assert "/ARM/" not in printed  # the run folders by name
    # under the temp dir, as a checkout in /tmp: no "not added" line, since the report stage adds them
    assert "leaderboard: not added" not in printed
    for arm in ("electra-2e+08", "random-init"):
        assert f"  {out / 'glue' / arm}/results.json   every seed's scores" in printed
    assert f" ui --backend-store-uri sqlite:///{tmp_path / 'mlflow.db'}" in printed
    assert "/runs?viewStateShareKey=leaderboard" in printed
    assert str(out / "demo.json") in printed

    # Rerun: nothing is trained or exported again.
    stamps = {p: p.stat().st_mtime_ns for p in [*out.glob("pretrain/*/pretrain_meta.json"),
                                                bundle / "manifest.json"]}
    assert main(args) == 0
    assert "kept" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_plan_follows_the_device_and_missing_inputs_are_one_error(tmp_path, monkeypatch, capsys):
    assert demo.choose_plan("cuda") is demo.GPU and demo.choose_plan("cpu") is demo.CPU
    assert demo.GPU.preset == "electra-small" and demo.CPU.preset == "electra-tiny"
    monkeypatch.setenv("SHARED_DIR", str(tmp_path / "nowhere"))
    monkeypatch.delenv("GLUE_DIR", raising=False)
    with pytest.raises(UserError, match=r"--data-dir '.*nowhere/data/glue' and --corpus '.*gutenberg' not found"):
        demo.default_inputs(None, None)
    # From the command line: one line, exit 2, nothing written.
    assert main(["demo", "--device", "cpu", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: --data-dir ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_clock_rescales_the_eta_by_the_finished_stages(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(demo.time, "monotonic", lambda: now[0])
    plan = dataclasses.replace(demo.CPU, stage_s=(100.0, 200.0, 300.0, 400.0))
    clock = demo.Clock(plan)
    clock("first")  # nothing finished: the plan's 1000 s
    now[0] = 200.0  # the first stage took twice its 100 s: the other 900 s will take 1800
    clock("second")
    assert capsys.readouterr().out.splitlines() == [
        "first  (demo: 0:00 elapsed, about 16:40 left)", "second  (demo: 3:20 elapsed, about 30:00 left)"]


def test_clock_takes_its_eta_from_pre_trainings_first_minute_not_the_plan(monkeypatch, capsys):
    """A machine twice as slow as the plan's is told so a minute in, not after pre-training ends."""
    now = [0.0]
    monkeypatch.setattr(demo.time, "monotonic", lambda: now[0])
    plan = dataclasses.replace(demo.CPU, stage_s=(100.0, 200.0, 300.0, 400.0))
    clock = demo.Clock(plan)
    clock("first")  # the plan's 1000 s
    now[0] = 30.0
    clock.pace(0.15, 30.0)  # under a minute: too early to tell, nothing said
    now[0] = 60.0
    clock.pace(0.3, 60.0)  # 30% of the budget in 60 s: 200 s for a stage planned at 100 (twice as slow)
    clock.pace(0.6, 120.0)  # said once
    # pre-training's other 70% at that pace: 140 s; the other stages at twice their 900 s: 1800 s
    now[0] = 200.0
    clock("second")  # from here the finished stage's own time rescales, as before
    assert capsys.readouterr().out.splitlines() == [
        "first  (demo: 0:00 elapsed, about 16:40 left)",
        "demo: pre-training runs at 0.50x the plan's speed here; about 32:20 left in all (1:00 elapsed)",
        "second  (demo: 3:20 elapsed, about 30:00 left)"]


def test_clock_leaves_stages_kept_from_an_earlier_run_out_of_the_eta(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(demo.time, "monotonic", lambda: now[0])
    plan = dataclasses.replace(demo.CPU, stage_s=(100.0, 200.0, 300.0, 400.0))
    clock = demo.Clock(plan)
    clock("first")
    now[0] = 2.0  # pre-training kept from the run before: not a machine 50x faster than planned
    clock("second")
    now[0] = 402.0  # the second stage ran, at twice its 200 s: the other 700 s will take 1400
    clock("third")
    assert capsys.readouterr().out.splitlines()[1:] == [
        "second  (demo: 0:02 elapsed, about 15:00 left)", "third  (demo: 6:42 elapsed, about 23:20 left)"]
