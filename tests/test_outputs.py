"""Atomic writes: a failure mid-write keeps the old file and leaves no temporary behind."""

import zipfile

import pytest

from harness import outputs


def test_failed_write_keeps_previous_file(tmp_path):
    path = tmp_path / "results.json"
    outputs.write_json(path, {"runs": [1]})
    with pytest.raises(TypeError, match="cannot write object to JSON"):
        outputs.write_json(path, {"runs": [object()]})
    assert path.read_text() == '{\n  "runs": [\n    1\n  ]\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_zip_and_bytes_round_trip(tmp_path):
    outputs.write_zip(tmp_path / "sub" / "a.zip", {"RTE.tsv": "index\tprediction\n0\tentailment\n"})
    with zipfile.ZipFile(tmp_path / "sub" / "a.zip") as archive:
        assert archive.read("RTE.tsv").decode() == "index\tprediction\n0\tentailment\n"
    outputs.write_bytes(tmp_path / "p.png", b"\x89PNG")
    assert (tmp_path / "p.png").read_bytes() == b"\x89PNG"
