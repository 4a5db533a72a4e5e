"""`harness experiment efficiency`: arms pre-trained to equal FLOPs, fine-tuned, tabulated, resumed;
and the table's seed statistics against values worked by hand."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from reports import efficiency
from reports.efficiency import CONTROL, Arm
from tests.conftest import MICRO, write_corpus
from tests.fixtures_processes import mlflow_store_copy


def _results(scores: dict[tuple[str, int], float]) -> dict:
    """Seed records whose paper metric (RTE and MRPC: accuracy) is `score`; their mean-of-metrics
    `score` (MRPC averages in F1) must not be what the table uses."""
    return {"runs": [{"task": task, "seed": seed, "score": -1.0,
                      "metrics": {"validation": {"accuracy": score, "f1": -1.0}}}
                     for (task, seed), score in scores.items()]}


def test_seed_scores_are_means_over_tasks_and_points_take_median_and_spread():
    # seed 0: (0.50 + 0.70) / 2 = 0.60; seed 1: (0.60 + 0.90) / 2 = 0.75; seed 2: (0.40 + 0.80) / 2 = 0.60;
    # seed 3 lacks mrpc and is left out.
    results = _results({("rte", 0): 0.5, ("mrpc", 0): 0.7, ("rte", 1): 0.6, ("mrpc", 1): 0.9,
                        ("rte", 2): 0.4, ("mrpc", 2): 0.8, ("rte", 3): 1.0})
    assert efficiency.seed_scores(results, ["rte", "mrpc"]) == pytest.approx({0: 60.0, 1: 75.0, 2: 60.0})
    p = efficiency.point(Arm("electra", 1e14, 1.02e14, results, {"steps": 7}), ["rte", "mrpc"])
    assert (p.glue_median, p.glue_min, p.glue_max, p.seeds) == pytest.approx((60.0, 60.0, 75.0, 3))
    assert p.glue_std == pytest.approx(50 ** 0.5)  # population std of 60, 75, 60: sqrt(((-5)² + 10² + (-5)²) / 3)
    # Task medians over every seed a task has: rte 0.5, 0.6, 0.4, 1.0 -> 0.55; mrpc 0.7, 0.9, 0.8 -> 0.8.
    assert p.task_medians == pytest.approx({"rte": 55.0, "mrpc": 80.0})
    control = efficiency.point(Arm(CONTROL, 0.0, 0.0, _results({("rte", 0): 0.5, ("mrpc", 0): 0.5})),
                               ["rte", "mrpc"])
    table = efficiency.markdown([p, control], ["rte", "mrpc"])
    assert "| RTE (accuracy) | MRPC (accuracy) |" in table.splitlines()[0]
    assert table.splitlines()[2].startswith(f"| {CONTROL} | 0 | 0 |")  # the control comes first
    assert "| **60.0** | 7.1 | 60.0–75.0 | 3 |" in table
    with pytest.raises(ValueError, match="no seed with every task"):
        efficiency.point(Arm("mlm", 1e14, 1e14, _results({("rte", 0): 0.5})), ["rte", "mrpc"])


def test_significance_lines_quote_harness_compare():
    row = {"difference": 2.06, "ci_low": -0.4, "ci_high": 4.5, "p_value": 0.081, "verdict": "no detectable "
           "difference at this sample size", "detectable": 3.3, "seeds_a": 3, "seeds_b": 3,
           "covers": "seeds and dev examples"}
    text = efficiency.significance([{"a": "electra-1e+14", "b": "mlm-1e+14", "budget_flops": 1e14, "row": row},
                                    {"a": "electra-1e+14", "b": CONTROL, "budget_flops": 1e14, "error": "no outputs"}])
    assert ("- **electra-1e+14 vs mlm-1e+14** at 1.00e+14 FLOPs: +2.1 points [-0.4, +4.5], p = 0.081: "
            "**no detectable difference at this sample size** (detectable: 3.3 points; 3 vs 3 seeds; interval "
            "covers seeds and dev examples)") in text
    assert f"- **electra-1e+14 vs {CONTROL}** at 1.00e+14 FLOPs: not computed (no outputs)" in text


def test_points_carry_the_glue_interval_of_their_tasks():
    results = _results({("rte", 0): 0.5, ("mrpc", 0): 0.7})
    results["glue"] = {"ci_low": 0.5, "ci_high": 0.7, "tasks": ["mrpc", "rte"], "interval": {"value": 0.61}}
    p = efficiency.point(Arm("electra", 1e14, 1e14, results), ["rte", "mrpc"])
    assert (p.glue_ci_low, p.glue_ci_high, p.glue_mean) == pytest.approx((50.0, 70.0, 61.0))
    # the interval beside the mean it is about, not the median (60.0) beside it
    assert efficiency.markdown([p], ["rte", "mrpc"]).splitlines()[2].endswith("| **60.0** | 0.0 | 60.0–60.0 | 1 | "
                                                                                "61.0 [50.0, 70.0] |")
    assert efficiency.point(Arm("electra", 1e14, 1e14, results), ["rte"]).glue_ci_low is None  # other tasks


def _args(tmp_path, corpus, glue_data, *extra, **flags):
    """The command line; `flags` replace the defaults of --budget-flops, --objectives, --seeds."""
    chosen = {"budget_flops": "2e8,4e8", "objectives": "electra,mlm", "seeds": "2"} | flags
    return ["experiment", "efficiency", "--preset", MICRO.name, "--corpus", str(corpus),
            "--budget-flops", chosen["budget_flops"], "--objectives", chosen["objectives"], "--tasks", "rte,stsb",
            "--seeds", chosen["seeds"], "--data-dir", str(glue_data), "--output", str(tmp_path / "exp"),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
            "pretrain.tokenizer=train", "pretrain.train_vocab_size=200", "pretrain.precision=fp32",
            f"pretrain.cache_dir={tmp_path / 'cache'}", "finetune.num_epochs=1", "finetune.batch_size=8",
            "finetune.precision=fp32", *extra]


# Slow tier, over 30 s (41 s alone; 47 s when the relative path had a rerun of its own): the only
# end-to-end run of `harness experiment efficiency` (four pre-trainings and a control, each fine-tuned on
# two seeds, compared, then resumed with a third seed).
# Fine-tuning one task instead of two saved 3 s of it (measured), so it keeps both.
@pytest.mark.slow
def test_experiment_pretrains_every_arm_to_its_budget_finetunes_and_resumes(tmp_path, micro, glue_data, capsys,
                                                                           monkeypatch, tmp_path_factory):
    corpus = write_corpus(tmp_path / "corpus.txt")
    mlflow_store_copy(tmp_path_factory, tmp_path / "mlflow.db")  # made once: creating one takes seconds
    assert main(_args(tmp_path, corpus, glue_data)) == 0
    out = tmp_path / "exp"
    summary = json.loads((out / "efficiency.json").read_text())
    arms = {(a["objective"], a["budget_flops"]): a for a in summary["arms"]}
    assert set(arms) == {(CONTROL, 0.0), ("electra", 2e8), ("mlm", 2e8), ("electra", 4e8), ("mlm", 4e8)}
    for (objective, budget), arm in arms.items():
        if objective == CONTROL:
            continue
        meta = json.loads((out / "pretrain" / f"{objective}-{budget:g}" / "pretrain_meta.json").read_text())
        assert meta["objective"] == objective and meta["config"]["max_flops"] == budget
        # Stopped by the budget: at or past it by less than one step.
        assert budget <= meta["train_flops"] < budget + meta["train_flops"] / meta["steps"]
        assert arm["pretrain_flops"] == meta["train_flops"] and arm["seeds"] == 2
    # Every arm shares the tokenizer and the discriminator shape, the control included.
    shapes = {json.dumps({k: v for k, v in json.loads(p.read_text()).items()
                          if k in ("vocab_size", "hidden_size", "num_hidden_layers", "embedding_size")})
              for p in out.glob("*/**/discriminator/config.json")} | \
        {json.dumps({k: v for k, v in json.loads((out / CONTROL / "config.json").read_text()).items()
                     if k in ("vocab_size", "hidden_size", "num_hidden_layers", "embedding_size")})}
    assert len(shapes) == 1
    glue = json.loads((out / "glue" / "electra-4e+08" / "results.json").read_text())
    assert {(r["task"], r["seed"]) for r in glue["runs"]} == {("rte", 0), ("rte", 1), ("stsb", 0), ("stsb", 1)}
    assert glue["flops"]["pretrain_flops"] == arms[("electra", 4e8)]["pretrain_flops"]
    # Each budget's ELECTRA arm against MLM and the control, from harness compare.
    text = (out / "efficiency.md").read_text()
    for pair in ("electra-2e+08 vs mlm-2e+08", "electra-4e+08 vs mlm-4e+08", "electra-2e+08 vs random-init"):
        assert f"**{pair}**" in text
    assert "not computed" not in text and text.count(" points [") == 4
    assert all("row" in c for c in summary["comparisons"]) and arms[("electra", 2e8)]["glue_ci_low"] is not None
    for name in ("efficiency.md", "efficiency.csv", "report/leaderboard.md"):
        assert (out / name).stat().st_size > 0
    assert (out / "efficiency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "random-init" in capsys.readouterr().out

    # Resume: a rerun keeps every finished pre-training and fine-tuning, and adds a seed. It names the same
    # data folder by a relative path, which is the same experiment (`harness demo` records it absolute);
    # the absolute path is given again below. (One rerun for both: each costs ~7 s of tables and reports.)
    before = {p: p.stat().st_mtime_ns for p in out.glob("pretrain/*/pretrain_meta.json")}
    monkeypatch.chdir(glue_data.parent)
    assert main(_args(tmp_path, corpus, Path(glue_data.name), seeds="3")) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("pretrain/*/pretrain_meta.json")} == before
    assert "kept" in capsys.readouterr().out
    glue = json.loads((out / "glue" / "mlm-2e+08" / "results.json").read_text())
    assert sorted(r["seed"] for r in glue["runs"] if r["task"] == "rte") == [0, 1, 2]

    # Changing a shared setting would make the arms incomparable: refused, nothing touched.
    assert main(_args(tmp_path, corpus, glue_data, "finetune.learning_rate=1e-4")) == 2
    assert "holds an experiment with other finetune" in capsys.readouterr().err
    shutil.rmtree(out / "glue" / CONTROL)  # a lost fine-tuning is simply redone
    assert main(_args(tmp_path, corpus, glue_data, "--no-control")) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("pretrain/*/pretrain_meta.json")} == before
    assert "kept" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "flags", "message"), [
    ([], {"budget_flops": "1e14,lots"}, "--budget-flops '1e14,lots' is not a comma list of numbers"),
    ([], {"budget_flops": "0"}, "needs positive FLOPs counts"),
    ([], {"budget_flops": "1e14,nan"}, "needs positive FLOPs counts (got (100000000000000.0, nan))"),
    ([], {"objectives": "electra,xlnet"}, "unknown objective 'xlnet' in --objectives"),
    ([], {"seeds": "0"}, "--seeds must be at least 1"),
    (["pretrain.max_flops=1e9"], {}, "the experiment sets budgets and objectives itself"),
    (["learning_rate=1e-3"], {}, "setting 'learning_rate=1e-3' must be pretrain.KEY=VALUE or finetune.KEY=VALUE"),
    (["finetune.num_epoch=2"], {}, "unknown setting 'num_epoch'"),
    (["pretrain.seq_len=4"], {}, "seq_len=4 is too short"),
    (["--shard", "1/2"], {}, "--shard 1/2 slices a `harness run` grid; every slice of an experiment would"),
    (["--gpus-per-unit", "2"], {}, "--gpus-per-unit 2 asks for 2 GPUs a unit and no GPU is visible here"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, micro, glue_data, capsys, extra, flags, message):
    corpus = write_corpus(tmp_path / "corpus.txt")
    assert main(_args(tmp_path, corpus, glue_data, *extra, **flags)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "exp").exists()


def test_bad_glue_data_fails_before_any_pre_training(tmp_path, micro, glue_data, capsys):
    """The GLUE runner's data check (through the registry of kinds) runs before the first arm pre-trains."""
    dev = glue_data / "RTE" / "dev.tsv"
    lines = dev.read_text().splitlines()
    dev.write_text("\n".join([lines[0], "no tabs here", *lines[1:]]) + "\n")
    assert main(_args(tmp_path, write_corpus(tmp_path / "corpus.txt"), glue_data)) == 2
    err = capsys.readouterr().err
    assert f"{dev}:2: expected " in err and err.count("\n") == 1
    assert not (tmp_path / "exp").exists()


# Slow tier, over 30 s (~40 s on two shared cores: a pre-training, then the pool's 4 units): the one check
# of an experiment's fine-tunings through the grid.
@pytest.mark.slow
def test_a_grid_flag_fine_tunes_every_arm_as_one_grid_after_every_pre_training(tmp_path, micro, glue_data,
                                                                               capsys, tmp_path_factory):
    corpus = write_corpus(tmp_path / "corpus.txt")
    mlflow_store_copy(tmp_path_factory, tmp_path / "mlflow.db")
    args = _args(tmp_path, corpus, glue_data, "--workers", "2", budget_flops="2e8", objectives="electra",
                 seeds="1")
    assert main(args) == 0
    out = capsys.readouterr().out
    # two stages: the pre-training, then one grid of 2 arms x 2 tasks x 1 seed
    assert "[1/2] pre-train electra" in out and "[2/2] fine-tune 2 arms on stsb,rte x 1 seeds through the grid" in out
    assert "grid: 4 units (2 models x 2 tasks x 1 seed) through the local executor" in out
    exp = tmp_path / "exp"
    for arm in (CONTROL, "electra-2e+08"):  # each arm's folder as the in-process path leaves it
        glue = json.loads((exp / "glue" / arm / "results.json").read_text())
        assert sorted((r["task"], r["seed"]) for r in glue["runs"]) == [("rte", 0), ("stsb", 0)]
        assert (exp / "glue" / "grid" / "logs" / f"{arm}.rte.seed0.log").is_file()
    summary = json.loads((exp / "efficiency.json").read_text())
    assert {a["objective"] for a in summary["arms"]} == {CONTROL, "electra"}
    assert (exp / "report" / "leaderboard.md").is_file() and (exp / "efficiency.png").is_file()


@pytest.mark.slow
def test_diverged_seeds_end_the_experiment_with_one_line_and_exit_2(tmp_path, micro, glue_data, capsys,
                                                                    tmp_path_factory):
    # lr 1e30 diverges every seed (batch 4: step 2 is past warmup, and the epoch's mean loss is nan)
    corpus = write_corpus(tmp_path / "corpus.txt")
    mlflow_store_copy(tmp_path_factory, tmp_path / "mlflow.db")
    args = _args(tmp_path, corpus, glue_data, "finetune.learning_rate=1e30", "finetune.batch_size=4",
                 "--no-control", budget_flops="2e8", objectives="electra", seeds="1")
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert re.fullmatch(r"harness: error: 2 fine-tunings diverged \(electra-2e\+08 stsb seed 0, electra-2e\+08 "
                        r"rte seed 0: training loss became nan by step \d+; lower learning_rate\); they are "
                        r"recorded as diverged in glue/ARM/results\.json and left out of the tables; re-run "
                        r"with a lower finetune\.learning_rate into a new --output", err.splitlines()[-1])
    assert "Traceback" not in err and "1 arms; table, plot and report in" in out
    # Every table is written first; the arm without a GLUE score is named under the empty one.
    exp = tmp_path / "exp"
    assert "No GLUE score (no seed finished every task; see glue/ARM/results.json): electra-2e+08" in \
        (exp / "efficiency.md").read_text()
    assert json.loads((exp / "efficiency.json").read_text())["arms"] == []
    assert (exp / "efficiency.png").read_bytes()[:4] == b"\x89PNG" and (exp / "report" / "leaderboard.md").is_file()
    glue = json.loads((exp / "glue" / "electra-2e+08" / "results.json").read_text())
    assert sorted((r["task"], r["seed"]) for r in glue["diverged"]) == [("rte", 0), ("stsb", 0)]
