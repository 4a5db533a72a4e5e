"""`harness run squad` end to end on a tiny model and tiny SQuAD files; bad input is one line and exit 2."""

import json

import pytest
import torch

from tasks.config import FinetuneConfig, SquadConfig
from tasks.registry import SQUAD_TASKS
from tasks.squad import SquadSource
from tests import mlflow_store
from tests.conftest import SQUAD_SMALL, run_cli, squad_args, write_squad


def statuses(tmp_path):
    return mlflow_store.statuses(tmp_path / "mlflow.db")


@pytest.mark.slow
def test_v1_holds_out_dev_articles_and_writes_results(tiny_model, tmp_path, capsys):
    data = tmp_path / "squad"
    write_squad(data / "dev-v1.1.json", "1.1", bad_offset=True)
    args = squad_args(tiny_model, tmp_path, "--version", "1.1", "--data-dir", str(data), *SQUAD_SMALL,
                      "num_epochs=3", "learning_rate=2e-3")
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "note: no train file, so training uses 4 articles" in out and "exact_match" in out
    assert err.count("harness: warning:") == 1 and "lies outside its" in err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["format"] == "electra-harness/squad-results/1" and results["tasks"] == ["squad"]
    assert results["data"]["holdout"] == {"fraction": 0.2, "seed": 0, "train_articles": 4, "dev_articles": 1}
    assert (results["data"]["answer_problems"], results["data"]["misaligned_answers"]) == (1, 0)
    assert (results["data"]["num_train_examples"], results["data"]["num_dev_examples"]) == (32, 8)
    assert results["settings"]["doc_stride"] == 16 and results["config"]["max_length"] == 64
    record = results["runs"][0]
    assert set(record["metrics"]["validation"]) == {"exact_match", "f1", "score"}
    assert record["resolved_config"]["num_epochs"] == 3 and record["num_train_examples"] == 32
    losses = [row["train_loss"] for row in record["history"]]
    assert losses[-1] < losses[0]
    assert set(results["summary"]["squad"]) >= {"score", "exact_match", "f1"}
    # One seed: an interval from the dev questions alone, said so; per-question scores average to F1.
    f1_summary = results["summary"]["squad"]["f1"]
    assert f1_summary["ci_low"] <= f1_summary["median"] <= f1_summary["ci_high"]
    assert f1_summary["ci_covers"] == "dev examples only (1 seed)" and "dev examples only" in out
    outputs = json.loads((tmp_path / "out" / "predictions" / "squad-seed0" / "dev_outputs.json").read_text())
    per_question = outputs["splits"]["validation"]["scores"]["f1"]
    assert sum(per_question) / len(per_question) == pytest.approx(record["metrics"]["validation"]["f1"])
    stem = tmp_path / "out" / "predictions" / "squad-seed0"
    predictions = json.loads((stem / "predictions.json").read_text())
    articles = [{f"p{2 * a + p}q{q}" for p in range(2) for q in range(4)} for a in range(5)]
    assert set(predictions) in articles  # one whole article held out, every question predicted
    assert not (stem / "null_odds.json").exists()
    assert set(statuses(tmp_path).values()) == {"FINISHED"} and len(statuses(tmp_path)) == 2
    assert (tmp_path / "out" / "models" / "squad-seed0" / "model.safetensors").is_file()



def test_a_finished_run_adds_its_row_to_the_leaderboard(tiny_model, tmp_path, capsys, temp_dir_elsewhere):
    data = tmp_path / "squad"
    write_squad(data / "dev-v1.1.json", "1.1")
    code, out, err = run_cli(squad_args(tiny_model, tmp_path, "--version", "1.1", "--data-dir", str(data), *SQUAD_SMALL,
                                    "num_epochs=1"), capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(results["flops"]["finetune_flops"]) == {"squad"} and results["flops"]["num_params"] > 0
    (row,) = mlflow_store.runs(tmp_path / "mlflow.db", "tags.source = 'measured'", experiment="leaderboard")
    em, f1 = (results["summary"]["squad"][key]["median"] for key in ("exact_match", "f1"))
    # stored to two decimals, as the MLflow UI prints them (results.json keeps the exact figures)
    assert row.data.metrics["squad11_em"] == round(em, 2) and row.data.metrics["squad11_f1"] == round(f1, 2)
    assert row.data.metrics["num_params"] == results["flops"]["num_params"]
    # a held-out split of the dev file and one epoch are not ELECTRA's SQuAD recipe: the row says so
    assert "num_epochs=1" in row.data.tags["recipe"] and "holdout_fraction=0.2" in row.data.tags["recipe"]
    # named for what it is: the model's folder, FLOPs unknown (no pre-training record), stage, task set
    assert row.data.tags["task_set"] == "squad11"
    assert f"leaderboard: tiny · squad11 · SQuAD1.1 F1 {f1:.1f} · fine-tuned · FLOPs ? [departs: " in out


@pytest.mark.slow
def test_v2_with_train_file_writes_null_odds(tiny_model, tmp_path, capsys):
    train = write_squad(tmp_path / "train.json", "2.0", num_articles=3, seed=1)
    dev = write_squad(tmp_path / "dev.json", "2.0", num_articles=2, seed=2)
    args = squad_args(tiny_model, tmp_path, "--version", "2.0", "--train-file", str(train),
                      "--dev-file", str(dev), *SQUAD_SMALL, "num_epochs=1", "max_eval_examples=10")
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "note: no train file" not in out and "best_f1" in out and "best_f1_thresh" in out
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["data"]["holdout"] is None and results["data"]["train_file"] == str(train)
    assert (results["data"]["num_train_examples_used"], results["data"]["num_dev_examples_used"]) == (24, 10)
    assert results["data"]["answerability_head"] is True
    # ELECTRA's rule decides "exact"/"f1" (null odds above -2.75: no answer); best_* beside it are dev-tuned
    assert (results["settings"]["answerability_head"], results["settings"]["null_threshold"]) == (True, -2.75)
    metrics = results["runs"][0]["metrics"]["validation"]
    assert {"exact", "f1", "HasAns_exact", "NoAns_f1", "best_exact", "best_exact_thresh", "best_f1",
            "best_f1_thresh"} <= set(metrics) and metrics["total"] == 10
    stem = tmp_path / "out" / "predictions" / "squad_v2-seed0"
    predictions = json.loads((stem / "predictions.json").read_text())
    null_odds = json.loads((stem / "null_odds.json").read_text())
    assert set(predictions) == set(null_odds) and len(predictions) == 10
    assert all(text for text in predictions.values())  # best non-null spans: the threshold is the scorer's
    assert set(statuses(tmp_path).values()) == {"FINISHED"}
    assert (tmp_path / "out" / "models" / "squad_v2-seed0" / "answerability_head.safetensors").is_file()


def test_squad_benchmark_keeps_nothing_and_its_plan_holds_the_resolved_settings(tiny_model, tmp_path):
    from harness.finetuning import model_setup
    from harness.finetuning.squad_finetuning import SquadFinetuning, SquadInvocation

    data = tmp_path / "squad"
    write_squad(data / "dev-v2.0.json", "2.0")
    invocation = SquadInvocation(model=str(tiny_model), task=SQUAD_TASKS["2.0"], output_dir=tmp_path / "out",
                                 config=FinetuneConfig(max_length=64),
                                 squad_config=SquadConfig(doc_stride=16, max_query_length=16),
                                 source=SquadSource(data_dir=str(data)))
    setup = model_setup.load(str(tiny_model), "fp32")
    preparer = SquadFinetuning(invocation)
    kept = dict(vars(preparer))
    plan = preparer.prepare(setup)
    assert vars(preparer) == kept and invocation.squad_config.null_threshold is None  # nothing stored back
    # The head and null threshold are decided in the plan, which every later call reads.
    assert plan.squad_config.answerability_head is True and plan.squad_config.null_threshold is not None
    assert plan.results["settings"]["null_threshold"] == plan.squad_config.null_threshold
    built = SquadFinetuning(invocation).build(plan, "squad_v2", setup)  # no prepare on this one
    assert built is plan.built and built.uses_head and len(built.train) == plan.results["data"]["num_train_windows"]


@pytest.mark.parametrize("joint", [True, False])
def test_squad_heads_save_and_load(joint, tiny_model, tmp_path):
    from tasks.squad_model import HEAD_FILE, JOINT_FILE, SquadModel

    torch.manual_seed(0)
    model = SquadModel.from_pretrained(tiny_model, answerability=True, joint=joint).eval()
    batch = {"input_ids": torch.tensor([[2, 5, 7, 3, 9, 11, 12, 3]]),
             "attention_mask": torch.ones(1, 8, dtype=torch.long),
             "token_type_ids": torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]]),
             "context_mask": torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])}
    with torch.no_grad():
        before = model(**batch)
    model.save_pretrained(tmp_path / "saved")
    assert [(tmp_path / "saved" / name).is_file() for name in (HEAD_FILE, JOINT_FILE)] == [True, joint]
    again = SquadModel.from_pretrained(tmp_path / "saved").eval()  # the heads as saved
    with torch.no_grad():
        after = again(**batch)
    assert set(after.keys()) == set(before.keys())
    for name in before.keys():
        torch.testing.assert_close(after[name], before[name])
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as the loop runs it where bf16 is fast
        loss = model(**batch, start_positions=torch.tensor([4]), end_positions=torch.tensor([5]),
                     is_impossible=torch.tensor([0])).loss
    assert loss.dtype == torch.float32 and loss > 0


def test_settings_go_to_their_configs(tiny_model, tmp_path, capsys, monkeypatch):
    import harness.finetuning.squad_finetuning

    seen = {}

    def fake_run(invocation, progress=None):
        seen["invocation"] = invocation
        return {"summary": {}, "runs": []}

    monkeypatch.setattr(harness.finetuning.squad_finetuning, "run_squad", fake_run)
    config_file = tmp_path / "squad.toml"
    config_file.write_text("batch_size = 16\nanswerability_head = false\nholdout_fraction = 0.5\n")
    args = squad_args(tiny_model, tmp_path, "--version", "2.0", "--data-dir", "d", "--config",
                      str(config_file), "doc_stride=64", "batch_size=8", "max_length=512")
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    invocation = seen["invocation"]
    assert invocation.task == SQUAD_TASKS["2.0"] and invocation.source == SquadSource(data_dir="d")
    assert invocation.config == FinetuneConfig(batch_size=8, max_length=512)
    assert invocation.squad_config == SquadConfig(doc_stride=64, answerability_head=False, holdout_fraction=0.5)


def test_max_length_defaults_to_electras_512(tiny_model, tmp_path, capsys):
    write_squad(tmp_path / "squad" / "dev-v1.1.json", "1.1")
    code, _, err = run_cli(squad_args(tiny_model, tmp_path, "--data-dir", str(tmp_path / "squad")), capsys)
    assert code == 2 and "max_length 512 exceeds the model's 64 positions; pass max_length=64" in err


def _malformed(path):
    path.write_text('{"data": [\n  {"title": "A",\n  }\n]}')


def _without_id(path):
    write_squad(path, "1.1")
    data = json.loads(path.read_text())
    del data["data"][1]["paragraphs"][0]["qas"][2]["id"]
    path.write_text(json.dumps(data))


BAD_INPUTS = {
    "malformed json": (_malformed, [], "dev-v1.1.json is not valid JSON: Expecting property name enclosed in "
                                       "double quotes at line 3 column 3"),
    "question without id": (_without_id, [], "question 2 in paragraph 0 of article 'article 1' has no 'id'"),
    "is_impossible in v1.1": (lambda p: write_squad(p, "2.0"), [],
                              "has 'is_impossible', a SQuAD 2.0 field, but version 1.1 was asked for"),
    "unknown version": (None, ["--version", "3.0"], "unknown SQuAD version '3.0'; choose one of 1.1, 2.0"),
    "unknown setting": (None, ["doc_strid=3", "batch_size=0"],
                        "unknown setting 'doc_strid' (did you mean 'doc_stride'? known: adam_epsilon, "
                        "answerability_head, batch_size, class_weights, compile, doc_stride"),
    "two bad settings": (None, ["doc_strid=3", "batch_size=0"], "; batch_size must be positive (got 0)"),
    "bad setting": (None, ["holdout_fraction=1"], "holdout_fraction must be between 0 and 1"),
    "no room for context": (None, ["max_query_length=61"], "raise max_length or lower max_query_length"),
    "train without dev": (None, ["--train-file", "t.json"], "--train-file 't.json' needs a --dev-file"),
    "no dev file": (lambda p: p.unlink(), [], "dev-v1.1.json not found (JSON files there: none)"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line(case, tiny_model, tmp_path, capsys):
    spoil, extra, message = BAD_INPUTS[case]
    path = write_squad(tmp_path / "squad" / "dev-v1.1.json", "1.1")
    if spoil is not None:
        spoil(path)
    data = [] if "--train-file" in extra else ["--data-dir", str(tmp_path / "squad")]
    code, _, err = run_cli(squad_args(tiny_model, tmp_path, *data, *SQUAD_SMALL, *extra), capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    assert not (tmp_path / "mlflow.db").exists()


def test_data_dir_from_env_else_the_hub(tiny_model, tmp_path, capsys, monkeypatch):
    from foundation.infra.errors import UserError
    from tasks import squad_data

    monkeypatch.setenv("SQUAD_DIR", str(tmp_path / "empty"))
    code, _, err = run_cli(squad_args(tiny_model, tmp_path, *SQUAD_SMALL), capsys)
    assert code == 2 and f"{tmp_path / 'empty' / 'dev-v1.1.json'} not found" in err
    asked = []

    def offline(version, split):
        asked.append((version, split))
        raise UserError("could not load it; pass --data-dir")

    monkeypatch.delenv("SQUAD_DIR")
    monkeypatch.setattr(squad_data, "load_squad_hub", offline)
    code, _, err = run_cli(squad_args(tiny_model, tmp_path, "--version", "2.0", *SQUAD_SMALL), capsys)
    assert code == 2 and asked == [("2.0", "train")]
    assert err.strip() == "harness: error: could not load it; pass --data-dir"
