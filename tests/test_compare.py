"""`harness compare` on synthetic run directories whose dev predictions differ by known amounts."""

import json
from pathlib import Path

import numpy as np
import pytest

from foundation.infra import atomic
from foundation.infra.errors import UserError
from reports import dev_outputs, results_schema
from tests.conftest import run_cli

N = 300


def write_results(directory, results_format, runs) -> None:
    """results.json of a finished run: its (task, seed) records (only task and seed matter here)."""
    tasks = list(dict.fromkeys(task for task, _ in runs))
    model = results_schema.ModelBlock(name=str(directory), path=str(directory))
    body = results_schema.body(results_format, model, {}, tasks, len(runs) // len(tasks), device="cpu", versions={})
    body["runs"] = [results_schema.seed_record(task, seed, {"validation": {}}, 0.0, [], 0, N, 0.0, 0.0, 0, 0.0, {})
                    for task, seed in runs]
    body["summary"] = {task: {"score": results_schema.MetricSummary(median=0.0)} for task in tasks}
    results_schema.write(directory / results_schema.FILE, body)


def write_run(directory, predictions_by_task, references_by_task, tokenization="tok", ids=None):
    """A run directory as `harness run glue` leaves it: results.json and per-seed dev outputs."""
    runs = []
    for task, predictions in predictions_by_task.items():
        references = references_by_task[task]
        for seed, row in enumerate(predictions):
            split = dev_outputs.glue_split(ids or list(range(len(references))), references.tolist(), row.tolist(),
                                           tokenization)
            atomic.write_json(dev_outputs.path_of(directory, task, seed),
                              dev_outputs.record(task, seed, {"validation": split}))
            runs.append((task, seed))
    write_results(directory, results_schema.GLUE_FORMAT, runs)
    return directory


def corrupt(rng, references, rate, seeds=3):
    """Per-seed predictions right except on a `rate` fraction of examples."""
    return np.where(rng.random((seeds, len(references))) < rate, 1 - references, references)


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(0)
    references = {"rte": rng.integers(0, 2, N), "cola": rng.integers(0, 2, N)}
    good = {task: corrupt(rng, refs, 0.1) for task, refs in references.items()}
    poor = {task: corrupt(rng, refs, 0.4) for task, refs in references.items()}
    return references, write_run(tmp_path / "good", good, references), write_run(tmp_path / "poor", poor, references)


def compare(capsys, *args):
    return run_cli(["compare", *args], capsys)


def test_a_clearly_better_run_is_called_better(runs, capsys):
    _, good, poor = runs
    code, out, err = compare(capsys, good, poor, "--json")
    assert code == 0, err
    result = json.loads(out)
    rows = {row["task"]: row for row in result["rows"]}
    assert set(rows) == {"rte", "cola", "GLUE"}
    # RTE accuracy: ~90% against ~60%, a 30-point gap, inside its interval; CoLA is scored by MCC.
    assert rows["rte"]["metric"] == "accuracy" and rows["cola"]["metric"] == "mcc"
    assert rows["rte"]["ci_low"] < 30 < rows["rte"]["ci_high"] and rows["rte"]["p_value"] < 0.001
    assert rows["rte"]["verdict"] == "A better"
    assert rows["GLUE"]["difference"] == pytest.approx((rows["rte"]["difference"] + rows["cola"]["difference"]) / 2)
    code, out, _ = compare(capsys, poor, good)
    assert code == 0 and "B better" in out and "paper convention" in out


def test_a_run_against_itself_shows_no_difference(runs, capsys):
    _, good, _ = runs
    code, out, err = compare(capsys, good, good, "--json", "--tasks", "rte")
    assert code == 0, err
    assert err == (f"harness: warning: RUN_A and RUN_B are the same run ({good}): every difference is 0 and "
                   "'detectable' is only the noise floor; pass two different run directories\n")
    _, _, err = compare(capsys, good, good / "results.json", "--tasks", "rte")
    assert err.startswith("harness: warning: RUN_A and RUN_B are the same run")
    _, _, err = compare(capsys, good, runs[2], "--tasks", "rte")
    assert err == ""  # two different runs: no warning
    [row] = json.loads(out)["rows"][:1]
    assert row["p_value"] == 1.0 and row["difference"] == 0
    assert row["verdict"] == "no detectable difference at this sample size"


def test_two_runs_without_any_variance_claim_no_detectable_difference(tmp_path, capsys):
    """Every seed of both runs predicts one label everywhere (an untrained tagger predicting O): the
    difference has no variance, so 'detectable 0.00' and '2 seeds' would be claims; n/a, with a note."""
    references = {"rte": np.random.default_rng(0).integers(0, 2, N)}
    constant = {"rte": np.ones((3, N), dtype=int)}
    a = write_run(tmp_path / "a", constant, references)
    b = write_run(tmp_path / "b", {"rte": np.ones((2, N), dtype=int)}, references)
    code, out, err = compare(capsys, a, b, "--json")
    assert code == 0, err
    [row] = json.loads(out)["rows"][:1]
    assert row["difference"] == 0 and row["detectable"] is None and row["seeds_needed"] is None
    assert row["verdict"] == "no detectable difference at this sample size"
    code, out, _ = compare(capsys, a, b)
    cells = [cell.strip() for cell in out.splitlines()[2].split(" | ")]
    assert cells[-2:] == ["n/a", "n/a"]
    assert "note: rte accuracy: A and B score the same on every seed and every resample" in out


def test_the_table_prints_every_row(runs, capsys):
    _, good, poor = runs
    code, out, _ = compare(capsys, good, poor, "--target", "2")
    assert code == 0
    assert [cell.strip() for cell in out.splitlines()[0].split(" | ")[:5]] == ["task", "metric", "A", "B", "A - B [95% CI]"]
    assert [line.split(" | ")[0].strip() for line in out.splitlines()[2:5]] == ["rte", "cola", "GLUE"]
    assert "seeds for 2" in out


def test_unpairable_runs_are_refused_in_one_line(runs, tmp_path, capsys):
    references, good, _ = runs
    rng = np.random.default_rng(1)
    other_dev = write_run(tmp_path / "other", {"rte": corrupt(rng, 1 - references["rte"], 0.1)},
                          {"rte": 1 - references["rte"]})
    only_rte = write_run(tmp_path / "rte-only", {"rte": corrupt(rng, references["rte"], 0.1)},
                         {"rte": references["rte"]})
    empty = tmp_path / "no-outputs"
    empty.mkdir()
    (empty / "results.json").write_text((good / "results.json").read_text())
    cases = [((good, other_dev, "--tasks", "rte"), "cannot be paired"),
             ((good, only_rte), "different tasks (B lacks cola); compare the common ones with --tasks rte"),
             ((good, tmp_path / "missing"), "does not exist"),
             ((good, empty), "no per-seed dev outputs for rte"),
             ((good, good, "--target", "0"), "--target must be a positive"),
             ((good, good, "--target", "nan"), "--target must be a positive, finite number of points (got nan)")]
    for args, message in cases:
        code, out, err = compare(capsys, *args)
        assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, (args, err)


def test_a_different_tokenisation_pairs_with_a_note(runs, tmp_path, capsys):
    references, good, _ = runs
    retokenised = write_run(tmp_path / "retok", {"rte": corrupt(np.random.default_rng(2), references["rte"], 0.1)},
                            {"rte": references["rte"]}, tokenization="other")
    code, out, _ = compare(capsys, good, retokenised, "--tasks", "rte")
    assert code == 0 and "note: rte: A and B tokenise the dev examples differently" in out


def test_squad_runs_compare_on_em_and_f1(tmp_path, capsys):
    # Per-question scores: A answers 60 more of 300 questions exactly (and fully) than B: +20 EM and F1.
    rng = np.random.default_rng(3)
    ids = [f"q{i}" for i in range(N)]
    paths = []
    for name, right in (("a", 200), ("b", 140)):
        runs = []
        for seed in range(2):
            exact = np.zeros(N)
            exact[rng.permutation(N)[:right]] = 100.0
            split = dev_outputs.squad_split(ids, {"exact_match": exact, "f1": exact}, ids, "tok")
            atomic.write_json(dev_outputs.path_of(tmp_path / name, "squad", seed),
                              dev_outputs.record("squad", seed, {"validation": split}))
            runs.append(("squad", seed))
        write_results(tmp_path / name, results_schema.SQUAD_FORMAT, runs)
        paths.append(tmp_path / name)
    code, out, err = compare(capsys, *paths, "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["task"], r["metric"]) for r in rows] == [("squad", "exact_match"), ("squad", "f1")]
    assert rows[0]["difference"] == pytest.approx(20.0) and rows[0]["verdict"] == "A better"
    assert json.loads(out)["scale"] == "percent"
    code, _, err = compare(capsys, paths[0], tmp_path / "good-glue-missing")
    assert code == 2


def test_the_efficiency_report_prints_a_comparison_without_variance_as_n_a():
    """harness experiment's significance lines take compare's rows, n/a detectable included."""
    from reports.efficiency import significance

    row = {"difference": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_value": 1.0, "detectable": None,
           "verdict": "no detectable difference at this sample size", "seeds_a": 3, "seeds_b": 2,
           "covers": "seeds and dev examples"}
    text = significance([{"a": "electra", "b": "mlm", "budget_flops": 0, "row": row}])
    assert "**electra vs mlm**: +0.0 points [+0.0, +0.0], p = 1: " in text and "(detectable: n/a; 3 vs 2 seeds" in text


@pytest.mark.parametrize("kind", ["text", "tagging"])
def test_compare_refuses_runs_of_a_kind_that_reads_files_on_other_files(kind):
    """Every kind that records its files' sha256 is held to them (the check once covered text alone)."""
    from harness import kinds
    from harness.experiments.comparison import ResultsFolder, _same_data

    def folder(train: str, dev: str) -> ResultsFolder:
        data = {"files": {"train": {"sha256": train}, "validation": {"sha256": dev}, "test": {"sha256": "t" * 64}}}
        return ResultsFolder(Path(kind), kind, {"phrases": {}}, kinds.load(kinds.KINDS[kind].description).fingerprint(data))

    _same_data(folder("a" * 64, "d" * 64), folder("a" * 64, "d" * 64))  # the same files pair
    with pytest.raises(UserError) as refused:
        _same_data(folder("a" * 64, "d" * 64), folder("b" * 64, "d" * 64))
    assert str(refused.value) == ("runs A and B were trained or scored on different data: the train file of phrases "
                                  f"differs (sha256 {'a' * 12} in A, sha256 {'b' * 12} in B); compare runs on the "
                                  "same data")
    with pytest.raises(UserError, match="the dev file of phrases differs"):
        _same_data(folder("a" * 64, "d" * 64), folder("a" * 64, "e" * 64))


def test_compare_holds_squad_runs_to_the_files_they_record():
    """SQuAD records its files' names and its held-out draw, no sha256: compare holds runs to those."""
    from harness.experiments.comparison import ResultsFolder, _same_data
    from tasks.squad_task import SquadDescription

    def folder(dev: str, seed: int) -> ResultsFolder:
        data = {"dev_file": f"/data/{dev}", "train_file": None, "holdout": {"fraction": 0.5, "seed": seed}}
        return ResultsFolder(Path("squad"), "squad", {"squad": {}}, SquadDescription.fingerprint(data))

    _same_data(folder("dev-v1.1.json", 0), folder("dev-v1.1.json", 0))
    with pytest.raises(UserError, match=r"the dev file of squad differs \(name dev-v1.1.json in A, name x.json in B\)"):
        _same_data(folder("dev-v1.1.json", 0), folder("x.json", 0))
    with pytest.raises(UserError, match="held-out dev articles of squad differs"):
        _same_data(folder("dev-v1.1.json", 0), folder("dev-v1.1.json", 1))
