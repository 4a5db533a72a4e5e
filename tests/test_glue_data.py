"""GLUE TSV reading: the real files' quirks, and one-line errors for bad files."""

import pytest

from foundation.infra.errors import UserError
from tasks.glue_data import glue_dir, load_glue, read_tsv
from tasks.registry import GLUE_TASKS, parse_tasks


def test_real_files_parse_with_official_counts(shared):
    root = shared / "data" / "glue"
    counts = {(name, split): len(data) for name in ("cola", "mrpc", "stsb", "rte", "wnli", "sst2")
              for split, data in load_glue(GLUE_TASKS[name], root).items()}
    assert counts[("cola", "train")] == 8551 and counts[("cola", "validation")] == 1043  # no header
    # BOM in the header; the file holds 3,667 pairs (3,668 lines with the header; MANIFEST says 3,668)
    assert counts[("mrpc", "train")] == 3667 and counts[("mrpc", "validation")] == 408
    assert counts[("stsb", "validation")] == 1500 and counts[("rte", "test")] == 3000
    assert counts[("sst2", "train")] == 67349 and counts[("wnli", "validation")] == 71


def test_real_quirks_are_handled(shared):
    root = shared / "data" / "glue"
    qnli_dev = read_tsv(GLUE_TASKS["qnli"], root / "QNLI" / "dev.tsv", labelled=True)
    assert len(qnli_dev) == 5463  # fields starting with a quote would merge rows without QUOTE_NONE
    assert sum(text.startswith('"') for text in qnli_dev["text_b"]) > 0
    stsb = read_tsv(GLUE_TASKS["stsb"], root / "STS-B" / "dev.tsv", labelled=True)
    assert stsb[0]["label"] == 5.0 and stsb[1]["label"] == 4.75
    mrpc = read_tsv(GLUE_TASKS["mrpc"], root / "MRPC" / "dev.tsv", labelled=True)
    assert mrpc[0]["label"] == 1 and mrpc[0]["text_a"].startswith("He said the foodservice pie")
    ax = load_glue(GLUE_TASKS["ax"], root)["test"]
    assert len(ax) == 1104 and ax[1103]["idx"] == 1103  # last line has no final newline
    cola = read_tsv(GLUE_TASKS["cola"], root / "CoLA" / "dev.tsv", labelled=True)
    assert cola[-1]["text_a"] and cola[0]["text_a"] == "The sailors rode the breeze clear of the rocks."


def test_missing_qnli_train_is_reported(shared):
    with pytest.raises(UserError, match=r"missing train file .*QNLI/train.tsv.* task 'qnli'"):
        load_glue(GLUE_TASKS["qnli"], shared / "data" / "glue")


def test_fixture_quirks(glue_data):
    rte = load_glue(GLUE_TASKS["rte"], glue_data)
    assert {s: len(d) for s, d in rte.items()} == {"train": 16, "validation": 8, "test": 6}
    assert rte["test"]["idx"] == list(range(6)) and rte["test"]["label"] == [-1] * 6
    cola = load_glue(GLUE_TASKS["cola"], glue_data)
    assert len(cola["validation"]) == 8 and cola["train"][0]["label"] in (0, 1)


def _bad(path, text):
    path.write_text(text)
    return path


def test_wrong_field_count_names_file_and_line(glue_data):
    path = _bad(glue_data / "RTE" / "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n")
    with pytest.raises(UserError, match=rf"{path}:3: expected 4 tab-separated fields, found 3"):
        load_glue(GLUE_TASKS["rte"], glue_data)


def test_unknown_label(glue_data):
    _bad(glue_data / "RTE" / "train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(UserError, match=r"train.tsv:2: unknown label 'maybe' for rte; expected one of entailment"):
        load_glue(GLUE_TASKS["rte"], glue_data)


def test_non_numeric_stsb_score(glue_data):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    _bad(glue_data / "STS-B" / "dev.tsv", header + "0\tg\tf\ty\t0\tn\tn\ta\tb\tfive\n")
    with pytest.raises(UserError, match=r"dev.tsv:2: STS-B score 'five' is not a number"):
        load_glue(GLUE_TASKS["stsb"], glue_data)


def test_empty_split(glue_data):
    _bad(glue_data / "RTE" / "dev.tsv", "index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(UserError, match="no examples in this split"):
        load_glue(GLUE_TASKS["rte"], glue_data)


def test_missing_directory_and_split(glue_data, tmp_path):
    with pytest.raises(UserError, match=r"GLUE data directory '.*nowhere' \(--data-dir\) does not exist"):
        glue_dir(str(tmp_path / "nowhere"))
    (glue_data / "RTE" / "train.tsv").unlink()
    with pytest.raises(UserError, match="missing train file"):
        load_glue(GLUE_TASKS["rte"], glue_data)
    with pytest.raises(UserError, match="no MRPC/ folder"):
        load_glue(GLUE_TASKS["mrpc"], glue_data)


def test_glue_dir_from_environment(glue_data, monkeypatch):
    monkeypatch.setenv("GLUE_DIR", str(glue_data))
    assert glue_dir(None) == glue_data
    monkeypatch.delenv("GLUE_DIR")
    assert glue_dir(None) is None  # the Hub


def test_task_names():
    assert [t.name for t in parse_tasks("RTE, mrpc")] == ["mrpc", "rte"]
    # all: AX too (predicted with MNLI), or the server zip lacks AX.tsv
    assert [t.name for t in parse_tasks("all")] == list(GLUE_TASKS) and parse_tasks("all")[-1].name == "ax"
    with pytest.raises(UserError, match="unknown task 'sst'; choose from cola, sst2"):
        parse_tasks("sst")
    with pytest.raises(UserError, match="add mnli to --tasks"):
        parse_tasks("ax,rte")


def test_run_glue_reads_the_shared_data_where_no_folder_is_named(tiny_model, tmp_path, monkeypatch, capsys):
    """Offline, without --data-dir or GLUE_DIR, `run glue` reads the shared folder's data/glue (as the
    demo and pre-training's `glue:` corpus do), not the Hub it cannot reach."""
    import json

    from tests.conftest import run_cli, write_glue_dir

    write_glue_dir(tmp_path / "shared" / "data" / "glue")
    monkeypatch.setenv("SHARED_DIR", str(tmp_path / "shared"))
    monkeypatch.delenv("GLUE_DIR", raising=False)
    code, _, err = run_cli(["run", "glue", "--model", tiny_model, "--tasks", "rte", "--seeds", "1",
                            "--output-dir", tmp_path / "out", "--tracking-uri", "none", "num_epochs=1"], capsys)
    assert code == 0, err
    (record,) = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert record["num_train_examples"] == 16  # write_glue_dir's RTE training file
    assert glue_dir(None, tmp_path / "nowhere") is None  # a missing shared copy leaves the Hub
