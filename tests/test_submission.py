"""The GLUE server's submission zip: AX from the best MNLI seed, the missing files named, and none when
test prediction is off."""

import json
import zipfile

import pytest

from tests.conftest import glue_args, run_cli


def test_submission_takes_ax_from_mnli_and_names_missing_files(tmp_path):
    from harness.finetuning.glue_finetuning import _write_submission
    from tasks.registry import SERVER_FILES

    predictions = tmp_path / "predictions"
    for task, seed, splits in (("mnli", 1, ("test_matched", "test_mismatched", "ax")), ("rte", 0, ("test",))):
        for split in splits:
            (predictions / f"{task}-seed{seed}").mkdir(parents=True, exist_ok=True)
            (predictions / f"{task}-seed{seed}" / f"{split}.tsv").write_text(f"index\tprediction\n0\t{split}\n")
    results = {"summary": {"mnli": {}, "rte": {}},
               "runs": [{"task": "mnli", "seed": 0, "score": 0.5}, {"task": "mnli", "seed": 1, "score": 0.7},
                        {"task": "rte", "seed": 0, "score": 0.6}]}
    found = _write_submission(tmp_path, results)
    with zipfile.ZipFile(tmp_path / "glue_submission.zip") as archive:
        assert sorted(archive.namelist()) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "RTE.tsv"]
        assert archive.read("AX.tsv").decode() == "index\tprediction\n0\tax\n"  # the best MNLI seed's
    assert len(SERVER_FILES) == 11 and SERVER_FILES[-1] == "AX.tsv"
    assert found["missing"] == ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "QNLI.tsv",
                                "WNLI.tsv"]
    assert found["note"] == (
        "glue_submission.zip lacks 7 of the 11 GLUE server files (CoLA.tsv, SST-2.tsv, MRPC.tsv, STS-B.tsv, "
        "QQP.tsv, QNLI.tsv, WNLI.tsv) and cannot be submitted as it is; run --tasks all (AX comes with MNLI) "
        "with test files in --data-dir for a complete one")


@pytest.mark.slow
def test_predict_test_false_skips_the_test_sets(tiny_model, glue_data, tmp_path, capsys, monkeypatch):
    from tasks import finetune

    predicted = []

    def recording_predict(model, task, datasets, *args, **kwargs):
        predicted.extend(datasets)
        return real_predict(model, task, datasets, *args, **kwargs)

    real_predict = finetune.predict
    monkeypatch.setattr(finetune, "predict", recording_predict)
    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1", "save_models=false",
                     "predict_test=false")
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert predicted and "test" not in predicted  # dev scored each epoch, the test set never
    assert not (tmp_path / "out" / "predictions" / "rte-seed0" / "test.tsv").exists()
    assert (tmp_path / "out" / "predictions" / "rte-seed0" / "validation.tsv").is_file()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["submission"]["file"] is None and not (tmp_path / "out" / "glue_submission.zip").exists()
    assert "note: no glue_submission.zip: test prediction was off (predict_test=false)" in out
