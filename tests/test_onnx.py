"""ONNX export and the torch-free runtime, on a tiny model fine-tuned through `harness run glue`."""

import json
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from harness.cli import main
from harness.deploy.bundle import sha256
from reports import results_schema
from tests import mlflow_store
from tests.conftest import REPO, WORDS, run_cli, write_glue_dir, write_tiny_model


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A tiny model fine-tuned one epoch on RTE and STS-B, and its RTE seed exported with int8."""
    root = tmp_path_factory.mktemp("onnx")
    glue = write_glue_dir(root / "glue")
    tracking = f"sqlite:///{root / 'mlflow.db'}"
    code = main(["run", "glue", "--model", str(write_tiny_model(root / "tiny")), "--tasks", "rte,stsb",
                 "--data-dir", str(glue), "--output-dir", str(root / "run"), "--tracking-uri", tracking,
                 "num_epochs=1", "batch_size=8", "precision=fp32"])
    assert code == 0
    code = main(["export", "onnx", "--run", str(root / "run"), "--task", "rte", "--quantize", "int8",
                 "--data-dir", str(glue), "--tracking-uri", tracking])
    assert code == 0
    return {"root": root, "glue": glue, "tracking": tracking, "run": root / "run",
            "bundle": root / "run" / "onnx" / "rte-seed0"}


def export_args(work, *extra):
    return ["export", "onnx", "--data-dir", work["glue"], "--tracking-uri", work["tracking"], *extra]


def test_export_writes_a_checked_bundle(work):
    import onnxruntime

    bundle = work["bundle"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert sorted(p.name for p in bundle.iterdir()) == ["manifest.json", "model.int8.onnx", "model.onnx",
                                                        "tokenizer.json"]
    assert {name: entry["sha256"] for name, entry in manifest["files"].items()} == {
        name: sha256(bundle / name) for name in ("model.onnx", "model.int8.onnx", "tokenizer.json")}
    assert (manifest["task"], manifest["labels"], manifest["max_length"]) == (
        "rte", ["entailment", "not_entailment"], 64)  # the tiny model has 64 positions
    assert manifest["source"]["seed"] == 0 and manifest["versions"]["onnxruntime"] == onnxruntime.__version__
    assert manifest["parity"]["examples"] == 8 and manifest["parity"]["max_abs_diff"] <= 1e-4
    session = onnxruntime.InferenceSession(str(bundle / "model.onnx"))
    assert [(i.name, i.shape) for i in session.get_inputs()] == [
        ("input_ids", ["batch", "sequence"]), ("attention_mask", ["batch", "sequence"]),
        ("token_type_ids", ["batch", "sequence"])]
    # The runtime's fp32 dev score is the fine-tuning loop's own PyTorch dev score: same tokens, same logits.
    results = json.loads((work["run"] / "results.json").read_text())
    rte = next(r for r in results["runs"] if r["task"] == "rte")
    assert manifest["quality"]["fp32"]["accuracy"] == rte["metrics"]["validation"]["accuracy"]
    assert manifest["quality"]["int8_delta_points"] >= -1.0 and manifest["quality"]["int8_target_met"]
    agreement = manifest["quality"]["int8_vs_fp32"]
    assert set(agreement) == {"same_prediction", "max_abs_diff"} and agreement["max_abs_diff"] < 0.05


def test_export_is_logged_to_mlflow_as_onnx_models(work):
    import mlflow

    from foundation.models.identity import model_identity

    mlflow.set_tracking_uri(work["tracking"])
    experiment = mlflow.get_experiment_by_name("export").experiment_id
    (run_row,) = mlflow.search_runs([experiment], "tags.task = 'rte'", output_format="list")
    assert run_row.info.status == "FINISHED" and run_row.data.metrics["parity_max_abs_diff"] <= 1e-4
    assert "dev_accuracy_int8" in run_row.data.metrics
    # A leaderboard row's key is the model_id tag: its ONNX models are one search away.
    key = model_identity(str(work["root"] / "tiny"), str(work["root"] / "tiny"))
    models = mlflow.search_logged_models(experiment_ids=[experiment], output_format="list",
                                         filter_string=f"tags.model_id = '{key}' AND tags.task = 'rte'")
    assert sorted((m.name, m.tags["precision"], m.source_run_id) for m in models) == [
        ("onnx-fp32", "fp32", run_row.info.run_id), ("onnx-int8", "int8", run_row.info.run_id)]
    loaded = mlflow.onnx.load_model(models[0].model_uri)
    assert [i.name for i in loaded.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]


def test_int8_bundle_predicts_like_pytorch(work):
    import torch
    import transformers

    from harness.deploy.onnx_predictor import Predictor, Request

    texts = [("the cat was very happy .", "the cat is happy ."), ("a dog was sad .", "she is good .")]
    fp32 = Predictor(work["bundle"], "fp32").predict([Request(a, b) for a, b in texts])
    int8 = Predictor(work["bundle"]).predict([Request(a, b) for a, b in texts])
    model_dir = work["run"] / "models" / "rte-seed0"
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    with torch.inference_mode():
        logits = model(**tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True,
                                   return_tensors="pt")).logits
    expected = torch.softmax(logits, dim=-1).numpy()
    got = np.array([[r["probabilities"][name] for name in ("entailment", "not_entailment")] for r in fp32])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert [r["label"] for r in int8] == [["entailment", "not_entailment"][i] for i in expected.argmax(1)]


def test_predict_in_a_process_without_torch(work, tmp_path):
    """`harness predict` from stdin: JSON Lines in, JSON Lines out, and torch is never imported."""
    lines = ['{"text": "the cat was happy .", "text_pair": "the cat is happy .", "id": 7}', "",
             '{"text": "a dog was sad .", "text_pair": "he is bad ."}']
    check = ("import sys; from harness.cli import main; code = main(sys.argv[1:]); "
             "heavy = sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules); "
             "print('imported:', heavy, file=sys.stderr); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", check, "predict", "--bundle", str(work["bundle"])],
                          input="\n".join(lines), capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "imported: []" in done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == 2 and results[0]["id"] == 7 and "id" not in results[1]
    assert {r["label"] for r in results} <= {"entailment", "not_entailment"}


def minimal_environment(root):
    """A virtualenv holding only onnxruntime, tokenizers and numpy (linked from this one, with their
    vendored .libs folders) and the project's source: what README promises `harness predict` needs."""
    import importlib
    from pathlib import Path

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], check=True, timeout=120)
    lib = root / "lib"
    lib.mkdir()
    for name in ("onnxruntime", "tokenizers", "numpy"):
        folder = Path(importlib.import_module(name).__file__).parent
        for found in (folder, folder.with_name(f"{name}.libs")):
            if found.exists():
                (lib / found.name).symlink_to(found)
    for package in ("foundation", "harness", "pretrain", "reports", "tasks"):
        (lib / package).symlink_to(REPO / package)
    (site,) = (root / "env").glob("lib/python*/site-packages")
    (site / "only-these.pth").write_text(f"{lib}\n")
    return root / "env" / "bin" / "python"


@pytest.mark.slow
def test_predict_runs_in_an_environment_with_only_onnxruntime_tokenizers_and_numpy(work, tmp_path):
    python = minimal_environment(tmp_path)
    for absent in ("torch", "scipy", "transformers", "mlflow"):  # the environment is what it claims
        assert subprocess.run([python, "-I", "-c", f"import {absent}"], capture_output=True).returncode != 0
    done = subprocess.run([python, "-I", "-m", "harness.cli", "predict", "--bundle", str(work["bundle"]),
                           "the cat was happy .", "the cat is happy ."],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["label"] in ("entailment", "not_entailment")


def test_a_pair_for_a_single_sentence_task_is_refused(work, tmp_path, capsys):
    from harness.deploy.onnx_predictor import Predictor

    # A one-sentence bundle: CoLA has two labels, as RTE, so the RTE classifier exports as a CoLA one.
    bundle = tmp_path / "cola"
    code, _, err = run_cli(export_args(work, "--model", work["run"] / "models" / "rte-seed0", "--task", "cola",
                                   "--output", bundle), capsys)
    assert code == 0, err
    assert Predictor(bundle).pipeline.pair is False and Predictor(work["bundle"]).pipeline.pair is True  # from the registry
    code, _, err = run_cli(["predict", "--bundle", bundle, "a cat", "a dog"], capsys)
    assert code == 2 and "cola classifies one sentence, got a pair; pass one text " in err
    code, out, _ = run_cli(["predict", "--bundle", bundle, "a cat sat ."], capsys)
    assert code == 0 and json.loads(out)["label"] in ("0", "1")  # CoLA's labels, as in its TSVs


def test_long_input_is_truncated_with_a_note(work, capsys):
    code, out, err = run_cli(["predict", "--bundle", work["bundle"], "the cat sat on the mat . " * 20, "a cat ."],
                         capsys)
    assert code == 0 and json.loads(out)["label"] in ("entailment", "not_entailment")
    assert "harness: note: TEXT: 146 tokens exceed the bundle's max_length 64; truncated to 64" in err


def test_regression_bundle_from_a_checkpoint_directory(work, tmp_path, capsys):
    import torch
    import transformers

    bundle, model_dir = tmp_path / "stsb", work["run"] / "models" / "stsb-seed0"
    code, out, err = run_cli(export_args(work, "--model", model_dir, "--task", "stsb", "--output", bundle),
                         capsys)
    assert code == 0, err
    assert "max |Δ|" in out and "dev fp32 on 8 examples: pearson" in out and "int8" not in out
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["labels"] is None and manifest["source"]["run_dir"] is None
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    pairs = [("a dog was sad .", "he is bad ."), ("the film was very good .", "it is good .")]
    with torch.inference_mode():
        encoded = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
        expected = model(**encoded).logits[:, 0]
    for (text, pair), score in zip(pairs, expected.tolist(), strict=True):
        code, out, _ = run_cli(["predict", "--bundle", bundle, text, pair], capsys)
        assert code == 0 and json.loads(out) == {"score": pytest.approx(score, abs=1e-5)}
    code, _, err = run_cli(["predict", "--bundle", bundle, "--precision", "int8", "a dog"], capsys)
    assert code == 2 and "lists no model.int8.onnx; choose a precision the bundle has (fp32)" in err


def test_checksum_mismatch_is_caught(work, tmp_path, capsys):
    for name in ("model.int8.onnx", "tokenizer.json", "model.onnx"):  # model.onnx: unused at int8, checked too
        copy = shutil.copytree(work["bundle"], tmp_path / name)
        with (copy / name).open("ab") as handle:
            handle.write(b" ")
        code, _, err = run_cli(["predict", "--bundle", copy, "a cat"], capsys)
        assert code == 2 and f"checksum mismatch for '{copy / name}'" in err and "re-export" in err


def test_an_edited_manifest_is_refused(work, tmp_path, capsys):
    copy = shutil.copytree(work["bundle"], tmp_path / "edited")
    manifest = json.loads((copy / "manifest.json").read_text())
    assert manifest["labels"] == ["entailment", "not_entailment"]
    manifest["labels"] = manifest["labels"][::-1]  # every answer would be the wrong label
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2))
    code, out, err = run_cli(["predict", "--bundle", copy, "a cat", "a dog"], capsys)
    assert code == 2 and out == "" and err == (
        f"harness: error: {copy / 'manifest.json'} was changed after export: its content does not match the "
        "manifest_sha256 it carries; restore the bundle or re-export it\n")
    del manifest["manifest_sha256"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run_cli(["predict", "--bundle", copy, "a cat", "a dog"], capsys)
    assert code == 2 and "was changed after export" in err



@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "sub/../../x"])
def test_a_manifest_naming_a_file_outside_the_bundle_is_refused(work, tmp_path, capsys, name):
    """Sealed again after the edit, as its author could: the seal proves no stray edit, not good intent."""
    from harness.deploy.bundle import SEAL, manifest_digest

    copy = shutil.copytree(work["bundle"], tmp_path / "bundle")
    (tmp_path / "x").write_text("not the bundle's")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": sha256(tmp_path / "x"), "bytes": 16}
    manifest[SEAL] = manifest_digest(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    code, out, err = run_cli(["predict", "--bundle", copy, "a cat", "a dog"], capsys)
    reason = "an absolute path" if name.startswith("/") else "a '..' in it"
    assert (code, out, err) == (2, "", f"harness: error: {copy / 'manifest.json'} names the file {name!r}, "
                                       f"which lies outside its folder ({reason}); re-export the bundle\n")


def test_the_bytes_hashed_are_the_bytes_loaded(work, tmp_path, monkeypatch):
    """Files swapped on disk between the checksum and the load are not what the predictor runs."""
    from harness.deploy import onnx_predictor

    copy = shutil.copytree(work["bundle"], tmp_path / "bundle")
    expected = onnx_predictor.Predictor(copy).predict([onnx_predictor.Request("a cat", "a dog")])
    checked = onnx_predictor.verify_files

    def then_swapped(directory, *args, **kwargs):
        loaded = checked(directory, *args, **kwargs)
        for name in ("model.onnx", "model.int8.onnx", "tokenizer.json"):
            (directory / name).write_bytes(b"swapped after the check")
        return loaded

    monkeypatch.setattr(onnx_predictor, "verify_files", then_swapped)
    assert onnx_predictor.Predictor(copy).predict([onnx_predictor.Request("a cat", "a dog")]) == expected

PREDICT_ERRORS = {
    "no bundle": (["--bundle", "{tmp}/nope", "a cat"], "bundle directory '{tmp}/nope' does not exist"),
    "a file": (["--bundle", "{bundle}/manifest.json", "a cat"],
               "--bundle '{bundle}/manifest.json' is a file, not a bundle directory; pass the folder "
               "`harness export onnx` wrote (its --output)"),
    "empty text": (["--bundle", "{bundle}", " "], "TEXT: empty text; give some text"),
    "three texts": (["--bundle", "{bundle}", "a", "b", "c"], "got 3 texts; pass one text, or two"),
    "one text for a pair task": (["--bundle", "{bundle}", "a cat"],
                                 "TEXT: rte classifies a pair of sentences, got one text; pass both (two texts, "
                                 "or text_pair in JSON Lines)"),
    "missing file": (["--bundle", "{bundle}", "--input", "{tmp}/in.jsonl"], "does not exist"),
}


@pytest.mark.parametrize("case", list(PREDICT_ERRORS))
def test_predict_bad_arguments(case, work, tmp_path, capsys):
    args, message = PREDICT_ERRORS[case]
    fill = {"bundle": work["bundle"], "tmp": tmp_path}
    code, out, err = run_cli(["predict", *(a.format(**fill) for a in args)], capsys)
    assert code == 2 and message.format(**fill) in err and len(err.strip().splitlines()) == 1, err
    assert out == ""


BAD_LINES = {
    '{"text": "a cat"}\nnot json\n': "requests.jsonl line 2: not valid JSON",
    '{"txt": "a cat"}\n': "requests.jsonl line 1: unknown key(s) 'txt'; use 'id', 'text', 'text_pair'",
    '{"text": 3}\n': "requests.jsonl line 1: 'text' must be a string",
    '{"text": "a", "text_pair": ""}\n': "requests.jsonl line 1: empty text_pair",
    "\n\n": "requests.jsonl holds no requests",
    '{"text": "a cat"}\n': "requests.jsonl line 1: rte classifies a pair of sentences, got one text",
}


@pytest.mark.parametrize("content", list(BAD_LINES))
def test_predict_bad_batch_input(content, work, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requests.jsonl").write_text(content)
    code, _, err = run_cli(["predict", "--bundle", work["bundle"], "--input", "requests.jsonl"], capsys)
    assert code == 2 and BAD_LINES[content] in err and len(err.strip().splitlines()) == 1, err


def test_predict_non_utf8_and_lone_surrogates_are_one_line(work, tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.chdir(tmp_path)
    pair = '{"text": "a cat", "text_pair": "a dog"}\n'
    (tmp_path / "latin1.jsonl").write_bytes(pair.encode() + '{"text": "caf\u00e9", "text_pair": "x"}'.encode("latin-1"))
    code, out, err = run_cli(["predict", "--bundle", work["bundle"], "--input", "latin1.jsonl"], capsys)
    assert (code, out) == (2, "") and err == ("harness: error: latin1.jsonl line 2: not UTF-8 text (byte 0xe9); "
                                              "save or send the requests as UTF-8\n")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe" + pair.encode("utf-16-le"))))
    code, _, err = run_cli(["predict", "--bundle", work["bundle"]], capsys)
    assert code == 2 and err.startswith("harness: error: stdin line 1: not UTF-8 text (byte 0xff)"), err
    (tmp_path / "surrogate.jsonl").write_text(pair + '{"text": "a \\ud800 cat", "text_pair": "a dog"}\n')
    code, _, err = run_cli(["predict", "--bundle", work["bundle"], "--input", "surrogate.jsonl"], capsys)
    assert code == 2 and err == ("harness: error: surrogate.jsonl line 2: text holds U+D800 at character 2, a "
                                 "lone surrogate, not text (from an escape such as \\ud800 or undecodable "
                                 "bytes); send valid Unicode\n"), err
    # argv: bytes that are not UTF-8 reach Python as surrogate escapes
    code, _, err = run_cli(["predict", "--bundle", work["bundle"], "a cat", "caf\udce9"], capsys)
    assert code == 2 and err.startswith("harness: error: TEXT: text_pair holds U+DCE9 at character 3"), err
    with_bom = tmp_path / "bom.jsonl"
    with_bom.write_bytes(b"\xef\xbb\xbf" + pair.encode())  # what Windows editors write: accepted
    code, out, err = run_cli(["predict", "--bundle", work["bundle"], "--input", str(with_bom)], capsys)
    assert code == 0 and json.loads(out)["label"] in ("entailment", "not_entailment"), err


def test_broken_bundles(work, tmp_path, capsys):
    no_manifest = shutil.copytree(work["bundle"], tmp_path / "a")
    (no_manifest / "manifest.json").unlink()
    no_model = shutil.copytree(work["bundle"], tmp_path / "b")
    (no_model / "model.int8.onnx").unlink()
    for bundle, message in ((no_manifest, "has no manifest.json"), (no_model, "model.int8.onnx' is missing")):
        code, _, err = run_cli(["predict", "--bundle", bundle, "a cat"], capsys)
        assert code == 2 and message in err and "Traceback" not in err, err


def test_a_bundle_of_an_unregistered_kind_is_refused_in_one_line(work, tmp_path, capsys):
    from harness.deploy.bundle import SEAL, manifest_digest

    copy = shutil.copytree(work["bundle"], tmp_path / "bundle")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["kind"] = "image-classification"
    manifest[SEAL] = manifest_digest({k: v for k, v in manifest.items() if k != SEAL})
    (copy / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run_cli(["predict", "--bundle", copy, "a cat"], capsys)
    assert (code, err.count("\n")) == (2, 1) and "has kind 'image-classification'; expected one of " \
        "sequence-classification, question-answering, token-classification" in err, err


def test_each_kind_of_task_has_a_pipeline_and_an_exporter_of_the_same_pipeline():
    """harness/kinds.py's rows: the predictor a bundle of the kind's exporter is read back with."""
    from harness.deploy.exporting import Exporter, exporters
    from harness.deploy.pipeline import Pipeline
    from harness.kinds import KINDS, load, pipelines

    found = pipelines()
    for row, exporter in zip(KINDS.values(), exporters(), strict=True):
        assert issubclass(load(row.predictor), Pipeline) and isinstance(exporter, Exporter)
        assert found[exporter.pipeline] is load(row.predictor), row.name
    # every task --task names belongs to one kind only
    named = [name for exporter in exporters() for name in exporter.named_tasks()]
    assert len(named) == len(set(named)) and {"rte", "stsb", "squad", "squad_v2"} <= set(named)


def test_export_bad_arguments(work, tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    cases = [
        (["--run", work["run"], "--task", "sst"], "unknown task 'sst'; choose one of cola, sst2"),
        (["--run", tmp_path, "--task", "rte"], "has no results.json"),
        (["--run", work["run"], "--task", "cola"], "has no fine-tuned 'cola'; it has rte, stsb"),
        (["--run", work["run"], "--task", "rte", "--seed", "3"], "has no rte seed 3; choose one of 0"),
        (["--model", work["root"] / "tiny", "--task", "rte"], "holds a ElectraForPreTraining, not a fine-"),
        (["--model", work["run"] / "models" / "rte-seed0", "--task", "stsb"], "has 2 outputs but stsb has 1"),
        (["--model", work["run"] / "models" / "rte-seed0", "--task", "squad"], "needs a span model"),
        (["--run", work["run"], "--task", "rte", "--output", tmp_path / "full"], "is not empty and holds no"),
    ]
    for extra, message in cases:
        code, _, err = run_cli(export_args(work, *extra), capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (extra, err)


def test_an_export_of_a_missing_run_folder_says_so_before_asking_for_a_task(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for run, message in [(tmp_path / "no" / "such", f"run folder {str(tmp_path / 'no' / 'such')!r} does not exist"),
                         (tmp_path / "empty", "empty' has no results.json")]:
        code, _, err = run_cli(["export", "onnx", "--run", run], capsys)
        assert code == 2 and message in err and "--task" not in err and err.count("\n") == 1, err


def test_an_export_into_a_busy_output_is_refused_in_one_line(work, tmp_path, capsys):
    """While another process writes a bundle to --output (it holds the lock beside it), a second
    export is refused with one line and leaves the folder alone."""
    import subprocess
    import sys

    output = tmp_path / "bundle"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); "
         "print('held', flush=True); sys.stdin.read()", str(tmp_path / ".bundle.export.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(export_args(work, "--run", work["run"], "--task", "rte", "--output", output), capsys)
    finally:
        holder.communicate("")
    assert code == 2 and err.strip() == (f"harness: error: another `harness export onnx` is writing {str(output)!r}; "
                                         "wait for it to finish or choose another --output"), err
    assert not output.exists()
    # Released (its process ended), the same export goes through.
    code, _, err = run_cli(export_args(work, "--run", work["run"], "--task", "rte", "--output", output), capsys)
    assert code == 0 and (output / "manifest.json").is_file(), err


def test_parity_failure_fails_the_export(work, tmp_path, capsys, monkeypatch):
    from harness.deploy import onnx_export

    monkeypatch.setattr(onnx_export, "parity", lambda model, path, feeds: 3e-3)
    code, _, err = run_cli(export_args(work, "--run", work["run"], "--task", "rte", "--output", tmp_path / "b"),
                       capsys)
    assert code == 2 and "parity check failed: max |Δlogit| 0.003 between PyTorch and onnxruntime" in err
    # staging removed too; only the export's lock file (empty, released) stays beside --output
    assert not (tmp_path / "b").exists() and [p.name for p in tmp_path.iterdir()] == [".b.export.lock"]
    statuses = [run.info.status for run in
                mlflow_store.runs(work["root"] / "mlflow.db", "attributes.run_name = 'rte onnx export'")]
    assert "FAILED" in statuses


def test_int8_below_target_warns_but_exports(work, tmp_path, capsys, monkeypatch):
    from harness.deploy import onnx_check

    scores = iter([{"accuracy": 0.75, "score": 0.75}, {"accuracy": 0.73, "score": 0.73}])  # fp32, then int8
    monkeypatch.setattr(onnx_check, "dev_scores", lambda *args: next(scores))
    code, out, err = run_cli(export_args(work, "--run", work["run"], "--task", "rte", "--quantize", "int8",
                                     "--output", tmp_path / "b"), capsys)
    assert code == 0, err
    assert err.strip() == ("harness: warning: int8 scores 2.00 points below fp32 on 8 rte dev examples "
                           "(target: at most 1); deploy model.onnx (--precision fp32) if that matters")
    assert "int8 - fp32: -2.00 points (target >= -1) MISSED" in out
    quality = json.loads((tmp_path / "b" / "manifest.json").read_text())["quality"]
    assert quality["int8_delta_points"] == pytest.approx(-2.0) and quality["int8_target_met"] is False


def _squad_file(path, version):
    """Eight questions over two long contexts (two or three 64-token windows each)."""
    rng = random.Random(0)
    plain = [w for w in WORDS if w not in ",.?"]
    paragraphs = []
    for p in range(2):
        sentences = [" ".join(rng.choice(plain) for _ in range(4)) + " ." for _ in range(14)]
        context, qas = " ".join(sentences), []
        for q in range(4):
            qa = {"id": f"p{p}q{q}", "question": " ".join(rng.choice(plain) for _ in range(3)) + " ?"}
            start = sum(len(s) + 1 for s in sentences[:3 * q])
            impossible = version == "2.0" and q == 3
            qa["answers"] = [] if impossible else [{"text": sentences[3 * q][:-2], "answer_start": start}]
            qas.append(qa | ({"is_impossible": impossible} if version == "2.0" else {}))
        paragraphs.append({"context": context, "qas": qas})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}))


@pytest.mark.parametrize(("version", "joint"), [("1.1", False), ("1.1", True), ("2.0", True), ("2.0", False)])
def test_squad_bundle_answers_like_the_pytorch_postprocessing(version, joint, work, tmp_path, capsys):
    import torch
    import transformers

    from harness.deploy.onnx_predictor import Predictor, Request
    from tasks import batching, squad, squad_data, squad_features
    from tasks.config import SquadConfig
    from tasks.registry import SQUAD_TASKS
    from tasks.squad_model import SquadModel

    task = "squad" if version == "1.1" else "squad_v2"
    _squad_file(tmp_path / "squad" / f"dev-v{version}.json", version)
    tokenizer = transformers.AutoTokenizer.from_pretrained(work["root"] / "tiny")
    transformers.set_seed(0)
    # `harness run squad`'s model: the answer mask always, the answerability classifier here for v2.0
    # only (its null logits unused for v1.1), ends from the joint head or the independent one.
    model = SquadModel(transformers.ElectraForQuestionAnswering.from_pretrained(work["root"] / "tiny"),
                       answerability=version == "2.0", joint=joint)
    # v1.1 through a `harness run squad` directory, whose settings the bundle takes; v2.0 through --model.
    settings = {"doc_stride": 16, "max_query_length": 16, "n_best": 10 if version == "1.1" else 20,
                "max_answer_length": 30, "null_threshold": 0.0}
    source = tmp_path / "run" / "models" / f"{task}-seed1"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    if version == "1.1":
        results_schema.write(tmp_path / "run" / results_schema.FILE, results_schema.ResultsBody(
            model=results_schema.ModelBlock(name="tiny", path="tiny"), settings=settings,
            runs=[results_schema.SeedRecord(task=task, seed=1, score=10.0, resolved_config={"max_length": 64})]))
    origin = ["--run", tmp_path / "run"] if version == "1.1" else ["--model", source]
    code, out, err = run_cli(["export", "onnx", *origin, "--task", task, "--quantize", "int8", "--data-dir",
                          tmp_path / "squad", "--output", tmp_path / "bundle",
                          "--tracking-uri", work["tracking"]], capsys)
    assert code == 0, err
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    expected = settings | {"version_2": version == "2.0", "doc_stride_is_step": True}
    if version == "2.0":  # through --model: ELECTRA's threshold on the answerability head's null odds
        expected["null_threshold"] = -2.75
    assert manifest["qa"] == expected
    assert manifest["outputs"][-1] == ("null_logits" if version == "2.0" else
                                       "end_top_index" if joint else "end_logits")
    examples, _ = squad_data.load_squad_json(tmp_path / "squad" / f"dev-v{version}.json", version)
    features = squad_features.prepare_eval_features(examples, tokenizer, 64, 16, 16)
    model.eval()
    batch = batching.collator(tokenizer)(list(features.remove_columns(["example_id", "offset_mapping",
                                                                       "allowed"])))
    with torch.inference_mode():
        output = model(**batch)
    # The fine-tuning loop's own reading of the outputs (cut to each window, beams kept whole).
    built = squad.SquadAdapter(SQUAD_TASKS[version], SquadConfig(), version == "2.0", joint, None, {}, {},
                                    {}, 0, 0)
    outputs = built.example_outputs(output, batch)
    # The span search is shared (tasks/squad_spans.py, pinned in tests/test_squad_spans.py); what this
    # compares is the rest: tokenizer.json windows, question truncation, max-context marks and the
    # exported graphs' logits and beams.
    answers, null_odds = squad_features.postprocess(
        examples, features, [o["start_logits"] for o in outputs], [o.get("end_logits") for o in outputs],
        n_best=settings["n_best"], version_2=version == "2.0", null_threshold=expected["null_threshold"],
        null_logits=[o["null_logits"] for o in outputs] if version == "2.0" else None,
        joint=outputs if joint else None)
    assert any(not all(flag for flag, o in zip(window, offsets, strict=True) if o is not None)
               for window, offsets in zip(features["allowed"], features["offset_mapping"], strict=True))
    predictor = Predictor(tmp_path / "bundle", "fp32")
    requests = [Request(row["question"], row["context"], row["id"]) for row in examples]
    assert len(predictor.encode(requests).encodings) == len(features) > len(examples)  # several windows
    results = predictor.predict(requests)
    if version == "2.0":
        assert [r["null_odds"] for r in results] == pytest.approx([null_odds[r["id"]] for r in results], abs=1e-5)
    assert {r["id"]: r["answer"] for r in results} == answers
    code, out, _ = run_cli(["predict", "--bundle", tmp_path / "bundle", examples[0]["question"],
                        examples[0]["context"]], capsys)
    assert code == 0 and set(json.loads(out)) >= {"answer", "start", "end", "score"}
    code, _, err = run_cli(["predict", "--bundle", tmp_path / "bundle", "who ?"], capsys)
    assert code == 2 and "a SQuAD bundle needs two texts" in err


def _sequence_predictor(**manifest):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    from harness.deploy.sequence_classification import Predictor

    tokenizer = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    return Predictor({"task": "reviews", "max_length": 8, "pair": False} | manifest, tokenizer, tokenizer)


def test_a_regression_answer_names_the_label_column_its_bundle_records():
    from harness.deploy.pipeline import Request
    from harness.deploy.text_export import Exporter
    from tasks.text_task import TextTask

    task = TextTask("reviews", ("body",), "stars", "regression", None, ("spearman", "pearson"), "spearman")
    fields = Exporter().own_fields(task)
    assert fields["label_column"] == "stars"
    logits = {"logits": [np.array([3.25], dtype=np.float32)]}
    answer = _sequence_predictor(labels=None, **fields).decode(Request("great"), 0, None, [0], logits)
    assert answer == {"stars": 3.25, "score": 3.25}
    glue = _sequence_predictor(labels=None).decode(Request("great"), 0, None, [0], logits)
    assert glue == {"score": 3.25}  # GLUE's STS-B bundle names no column: its answers stay as they were


def test_a_multilabel_bundle_predicts_above_the_runs_threshold_and_keeps_it():
    from harness.deploy.pipeline import Request
    from harness.deploy.text_export import Exporter
    from tasks.text_task import TextTask

    task = TextTask("topics", ("body",), "tags", "multilabel", ("a", "b"), ("micro_f1",), "micro_f1",
                    threshold=0.3)
    fields = Exporter().own_fields(task)
    assert fields["threshold"] == 0.3
    logits = {"logits": [np.array([-0.5, -1.0], dtype=np.float32)]}  # sigmoids 0.38 and 0.27
    answer = _sequence_predictor(labels=["a", "b"], **fields).decode(Request("x"), 0, None, [0], logits)
    assert answer["labels"] == ["a"]
    older = _sequence_predictor(labels=["a", "b"], multilabel=True).decode(Request("x"), 0, None, [0], logits)
    assert older["labels"] == []  # a bundle that records no threshold: 0.5, as its run trained
