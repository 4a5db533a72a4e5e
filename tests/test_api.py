"""The Python API (harness/api.py): `import harness` stays light, hands a kind's runner the Job the CLI
builds from the same inputs, refuses what the CLI refuses in the same words, and returns results whose
tables hold the run's numbers; README's "From Python" snippet runs as it stands in a fresh interpreter."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.infra.errors import UserError
from tests.conftest import REPO, run_cli
from tests.processes import child_env

HEAVY = ("torch", "transformers", "datasets", "pandas")


def test_import_harness_loads_neither_torch_nor_pandas_and_documents_its_functions():
    code = ("import sys, harness\n"
            "print([name for name in harness.__all__ if (getattr(harness, name).__doc__ or '').strip()])\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(), capture_output=True,
                            text=True, check=True)
    documented = ["Comparison", "Results", "UserError", "compare", "evaluate", "report", "run"]
    assert result.stdout.splitlines() == [repr(documented), "[]"]


# ---- one code path: the runner gets the CLI's Job --------------------------------------------------

BODY = {"format": "electra-harness/text-results/1", "seeds": 1, "runs": [], "summary": {}}


class FakeRunner:
    """The text kind's runner, recording each Job it is handed instead of fine-tuning."""

    def __init__(self):
        self.jobs = []

    def run(self, job):
        self.jobs.append(job)
        return BODY

    def summary(self, results):
        return "the table"


@pytest.fixture
def runner(monkeypatch):
    from harness import kinds

    fake, real = FakeRunner(), kinds.load
    monkeypatch.setattr(kinds, "load", lambda reference: fake if reference.endswith(":KIND_RUNNER")
                        else real(reference))
    return fake


@pytest.fixture
def files(tmp_path):
    """A task file and a settings file, each read by both ways in."""
    (tmp_path / "task.toml").write_text("dev_fraction = 0.2\n")
    (tmp_path / "settings.toml").write_text("num_epochs = 2\n")
    return tmp_path


def test_run_hands_the_runner_the_job_the_cli_builds(runner, files, capsys):
    import harness

    out = files / "out"
    code, printed, _ = run_cli(["run", "text", "--model", "m", "--train", "t.csv", "--text", "a,b", "--label",
                                "y", "--task-file", files / "task.toml", "--config", files / "settings.toml",
                                "--seeds", "2", "--output-dir", out, "--tracking-uri", "none",
                                "learning_rate=1e-4", "precision=fp32"], capsys)
    found = harness.run("text", model="m", train="t.csv", text=["a", "b"], label="y",
                        task_file=files / "task.toml", config=files / "settings.toml", seeds=2,
                        output_dir=out, tracking_uri="none", settings={"learning_rate": 1e-4, "precision": "fp32"})
    cli, api = runner.jobs
    assert code == 0 and api == cli
    assert api.description.text == ("a", "b") and api.description.dev_fraction == 0.2
    assert (api.config.learning_rate, api.config.num_epochs, api.config.precision) == (1e-4, 2, "fp32")
    assert api.task_file_dir == files.resolve() and api.seeds == 2 and not api.evaluate_only
    assert str(found) == "the table" and "the table" in printed and found.output_dir == out


def test_evaluate_hands_the_runner_the_job_harness_eval_builds(runner, tmp_path, capsys):
    import harness

    out = tmp_path / "out"
    code, _, _ = run_cli(["eval", "text", "--model", "m", "--train", "t.csv", "--text", "s", "--output-dir", out,
                          "max_length=64"], capsys)
    harness.evaluate("text", model="m", train="t.csv", text="s", output_dir=out, settings=["max_length=64"])
    cli, api = runner.jobs
    assert code == 0 and api == cli
    assert api.evaluate_only and (api.config.head, api.config.save_models, api.config.max_length) == ("hf", False, 64)


def test_unknown_keys_are_the_clis_one_line_error(tmp_path, capsys):
    import harness

    (tmp_path / "task.toml").write_text('txet = "s"\n')  # the description's key, as a task file gives it
    code, _, err = run_cli(["run", "text", "--model", "m", "--train", "t.csv", "--task-file",
                            tmp_path / "task.toml"], capsys)
    with pytest.raises(UserError) as caught:
        harness.run("text", model="m", train="t.csv", txet="s", output_dir=tmp_path)
    assert code == 2 and err == f"harness: error: {caught.value}\n" and "unknown setting 'txet'" in err
    code, _, err = run_cli(["run", "text", "--model", "m", "--train", "t.csv", "--text", "s", "lerning_rate=1"],
                           capsys)
    with pytest.raises(UserError) as caught:
        harness.run("text", model="m", train="t.csv", text="s", output_dir=tmp_path, settings={"lerning_rate": 1})
    assert code == 2 and err == f"harness: error: {caught.value}\n" and "unknown setting 'lerning_rate'" in err
    with pytest.raises(UserError, match="unknown kind of task 'txt'; choose one of glue, squad, text, tagging"):
        harness.run("txt", model="m", output_dir=tmp_path)


def test_bad_python_values_are_one_line_and_a_dict_is_a_settings_value(runner, tmp_path):
    import harness

    assert harness.UserError is UserError  # what a notebook catches; not exported before
    base = {"model": "m", "train": "t.csv", "text": "s", "output_dir": tmp_path}
    for bad, message in [({"settings": 42}, "settings must be a dict ({'learning_rate': 1e-4}) or key=value "
                                            "strings (['learning_rate=1e-4']), not int 42"),
                         ({"seeds": "3"}, "seeds must be a whole number, at least 1 (got '3'); e.g. seeds=3"),
                         ({"seeds": 0}, "seeds must be a whole number, at least 1 (got 0)"),
                         ({"model": None}, "pass model='...' (one model, or a list of them) or models=[...]; "
                                           "got neither"),
                         ({"model": 3}, "model(s) must be a model (a str or Path) or a list of them (got 3)")]:
        with pytest.raises(UserError) as caught:
            harness.run("text", **base | bad)
        assert str(caught.value).startswith(message), caught.value
    harness.run("text", **base, settings={"class_weights": {"neg": 1, "pos": 19}})
    assert runner.jobs[-1].config.class_weights == "neg=1,pos=19"  # "{'neg': 1, 'pos': 19}" before


def test_a_torchrun_process_but_rank_0_gets_none(runner, tmp_path, monkeypatch):
    import harness

    monkeypatch.setattr(runner, "run", lambda job: None)  # what a runner returns off rank 0
    assert harness.run("text", model="m", train="t.csv", text="s", output_dir=tmp_path) is None


def test_a_grid_from_python_is_the_grid_the_cli_runs(tiny_model, glue_data, tmp_path, monkeypatch, capsys):
    import dataclasses

    import harness
    from harness.grid import driver

    handed = []
    monkeypatch.setattr(driver, "run_grid", lambda grid, executor: handed.append((grid, executor)) or 0)
    out, second = tmp_path / "out", tmp_path / "second"
    second.mkdir()
    code, _, err = run_cli(["run", "glue", "--model", tiny_model, "--model", second, "--data-dir", glue_data,
                            "--tasks", "rte", "--seeds", "2", "--workers", "2", "--output-dir", out,
                            "--tracking-uri", "none", "num_epochs=1"], capsys)
    assert code == 0, err
    found = harness.run("glue", model=[tiny_model, second], data_dir=glue_data, tasks="rte", seeds=2,
                        workers=2, output_dir=out, tracking_uri="none", settings={"num_epochs": 1})
    assert found == []  # nothing trained: run_grid stood in for
    (cli, cli_pool), (api, api_pool) = handed
    assert dataclasses.replace(api, retry=cli.retry) == cli and api.retry == "the same harness.run call"
    assert (type(api_pool), api_pool.settings, api_pool.workers) == (type(cli_pool), cli_pool.settings, 2)
    harness.run("glue", models=[tiny_model], data_dir=glue_data, tasks="rte", output_dir=out, tracking_uri="none")
    assert handed[-1][0].models == (str(tiny_model),)  # models= is a grid, even of one


@pytest.mark.slow
def test_a_grid_from_python_returns_each_models_run_and_compare_takes_a_comma_list(tiny_model, glue_data,
                                                                                   tmp_path, capsys):
    # the one real grid through harness.run: two models, one RTE unit each, in this process (~6 s)
    import harness

    second = tmp_path / "second"
    shutil.copytree(tiny_model, second)
    found = harness.run("glue", model=[tiny_model, second], data_dir=glue_data, tasks="rte", executor="inline",
                        output_dir=tmp_path / "out", tracking_uri="none",
                        settings=["num_epochs=1", "save_models=false", "predict_test=false"])
    assert [run.output_dir for run in found] == [tmp_path / "out" / "tiny", tmp_path / "out" / "second"]
    for run in found:
        assert run.body == json.loads((run.output_dir / "results.json").read_text())
        assert [(r["task"], r["seed"]) for r in run.body["runs"]] == [("rte", 0)]
    compared = harness.compare(*found, tasks="rte")  # split into 'r', 't', 'e' before
    assert [row["task"] for row in compared.rows] == ["rte", "GLUE"]  # and the average of the tasks compared
    latex = compared.to_latex()
    row = compared.rows[0]
    assert latex.startswith("\\begin{tabular}{llrrrrl}\n\\toprule\n") and latex.endswith("\\end{tabular}\n")
    assert (f"rte & {row['metric']} & {row['a']:.2f} & {row['b']:.2f} & {row['difference']:+.2f} "
            f"[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}] & ") in latex


# ---- the results object ---------------------------------------------------------------------------


def _glue_body() -> dict:
    """Two RTE seeds, their summary with its interval and the GLUE section, as results.json holds them."""
    runs = [{"task": "rte", "seed": seed, "metrics": {"validation": {"accuracy": score, "score": score}},
             "score": score} for seed, score in ((0, 0.5), (1, 0.625))]
    accuracy = {"median": 0.5625, "mean": 0.5625, "std": 0.0625, "best": 0.625, "n": 2, "ci_low": 0.4,
                "ci_high": 0.725, "ci_covers": "seeds and dev examples"}
    summary = {"rte": {"score": accuracy, "accuracy": accuracy, "train_examples_per_s": 10.0,
                       "train_time_s": 3.0, "diverged_seeds": 0}}
    glue = {"score": 0.5625, "convention": "...", "tasks": ["rte"], "ci_low": 0.4, "ci_high": 0.725,
            "ci_covers": "seeds and dev examples", "interval": {"value": 0.5625}}
    return {"format": "electra-harness/glue-results/1", "seeds": 2, "runs": runs, "summary": summary,
            "glue_score": 0.5625, "glue": glue}


def test_results_tables_hold_the_files_numbers():
    from harness.api_results import Results

    found = Results(Path("runs/glue/x"), _glue_body())
    frame = found.to_pandas()
    assert list(frame.columns) == ["task", "metric", "median", "mean", "std", "best", "n", "ci_low", "ci_high",
                                   "ci_covers"]
    assert frame[["task", "metric"]].values.tolist() == [["rte", "score"], ["rte", "accuracy"],
                                                         ["GLUE", "paper convention"]]
    assert frame["ci_high"].tolist() == [0.725] * 3 and frame["n"].tolist()[:2] == [2, 2]
    seeds = found.to_pandas(per_seed=True)
    assert seeds.values.tolist() == [["rte", 0, "validation", 0.5, 0.5], ["rte", 1, "validation", 0.625, 0.625]]
    assert found.to_latex() == "\n".join([
        r"\begin{tabular}{llrrrrr}", r"\toprule",
        r"task & metric & median & mean [95\% CI] & std & best & seeds \\", r"\midrule",
        r"rte & score & 56.2 & 56.2 [40.0, 72.5] & 6.2 & 62.5 & 2 \\",
        r"rte & accuracy & 56.2 & 56.2 [40.0, 72.5] & 6.2 & 62.5 & 2 \\",
        r"GLUE & paper convention & 56.2 & 56.2 [40.0, 72.5] &  &  &  \\",
        r"\bottomrule", r"\end{tabular}", ""])
    assert repr(found) == "Results('runs/glue/x', tasks=['rte'], seeds=2)"


def test_latex_escapes_names_and_squad_stays_in_percent():
    from harness.api_results import Results

    summary = {"exact_match": {"median": 81.5, "mean": 81.25, "std": 0.25, "best": 81.5, "n": 2}}
    body = {"format": "electra-harness/squad-results/1", "runs": [], "summary": {"squad_v1.1": summary}}
    assert r"squad\_v1.1 & exact\_match & 81.5 & 81.2 [–] & 0.2 & 81.5 & 2 \\" in Results(Path("x"), body).to_latex()


# ---- a tiny run, start to end --------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_run(model128, tmp_path_factory):
    """Two seeds of a two-class file through harness.run (tracking off)."""
    import harness

    root = tmp_path_factory.mktemp("api")
    rng = random.Random(0)
    for split, n in (("train", 32), ("dev", 16)):
        rows = [f"{rng.choice(['the film', 'he', 'she'])} was very {['happy', 'sad'][i % 2]} .,{['up', 'down'][i % 2]}"
                for i in range(n)]
        (root / f"{split}.csv").write_text("sentence,mood\n" + "\n".join(rows) + "\n")
    return harness.run("text", model=model128, train=root / "train.csv", dev=root / "dev.csv", text="sentence",
                       label="mood", name="moods", seeds=2, output_dir=root / "run", tracking_uri="none",
                       settings={"precision": "fp32", "num_epochs": 1, "batch_size": 8})


@pytest.mark.slow
def test_a_tiny_runs_results_are_its_results_json(tiny_run):
    written = json.loads((tiny_run.output_dir / "results.json").read_text())
    assert tiny_run.body == written
    frame = tiny_run.to_pandas()
    summary = written["summary"]["moods"]
    assert frame["metric"].tolist() == ["score", "accuracy", "macro_f1", "mcc"]
    assert frame["mean"].tolist() == [summary[m]["mean"] for m in frame["metric"]]
    assert frame["ci_low"].tolist() == [summary[m]["ci_low"] for m in frame["metric"]]
    seeds = tiny_run.to_pandas(per_seed=True)
    assert seeds[["task", "seed", "split"]].values.tolist() == [["moods", 0, "validation"], ["moods", 1, "validation"]]
    assert seeds["accuracy"].tolist() == [r["metrics"]["validation"]["accuracy"] for r in written["runs"]]
    accuracy = summary["accuracy"]
    assert (f"moods & accuracy & {100 * accuracy['median']:.1f} & {100 * accuracy['mean']:.1f} "
            f"[{100 * accuracy['ci_low']:.1f}, {100 * accuracy['ci_high']:.1f}]") in tiny_run.to_latex()
    assert str(tiny_run).startswith("task ") and "macro_f1" in str(tiny_run)


@pytest.mark.slow
def test_evaluate_compare_and_report_take_a_runs_results(tiny_run, tmp_path):
    import harness

    root = tiny_run.output_dir.parent
    scored = harness.evaluate("text", model=tiny_run.output_dir / "models" / "moods-seed0",
                              train=root / "train.csv", dev=root / "dev.csv", text="sentence",
                              label="mood", name="moods", output_dir=tmp_path / "eval", tracking_uri="none")
    assert scored.body["evaluated"] is True and scored.summary["moods"]["accuracy"]["n"] == 1
    # the evaluated seed 0 is the run's seed 0: the same dev answers
    assert scored.scores[0]["accuracy"] == tiny_run.scores[0]["accuracy"]
    compared = harness.compare(tiny_run, scored.output_dir)
    assert [row["task"] for row in compared.rows] == ["moods"] and compared.rows[0]["seeds_b"] == 1
    assert list(compared.to_pandas()["verdict"]) == [compared.rows[0]["verdict"]] and "A - B" in str(compared)
    written = harness.report([tiny_run, scored], output=tmp_path / "report", tracking_uri="none")
    assert written == tmp_path / "report" and "moods" in (written / "leaderboard.md").read_text()


# Slow tier, over 30 s: the only run of README's Python snippet as a user types it (three seeds on 1,000
# SST-2 sentences), in a fresh interpreter.
@pytest.mark.slow
def test_readme_python_snippet_runs_as_written(model128, tmp_path, shared):
    """README's "From Python" block, run by python as it stands (MODEL: the tiny model; ../shared linked)."""
    block = re.search(r"## From Python.*?```python\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(shared)
    done = subprocess.run([sys.executable, "-c", block], cwd=work, env=child_env(MODEL=str(model128)),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((work / "runs/text/notebook/results.json").read_text())
    assert results["seeds"] == 3 and len(results["runs"]) == 3
    assert r"my-sentiment & accuracy & " in done.stdout and r"\end{tabular}" in done.stdout
