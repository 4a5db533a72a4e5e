"""Atomic writes: a failure mid-write keeps the old file or folder and leaves no temporary behind."""

import json
import zipfile
from pathlib import Path

import pytest

from foundation.infra import atomic


def test_failure_mid_write_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    atomic.write_json(path, {"runs": [1]})
    real_write = Path.write_bytes

    def half_then_fail(self, data):  # a full disk: half the bytes land, then the write fails
        real_write(self, data[: len(data) // 2])
        raise OSError("No space left on device")

    monkeypatch.setattr(Path, "write_bytes", half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_json(path, {"runs": [1, 2, 3, 4, 5, 6]})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"runs": [1]}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_unserialisable_value_is_refused_before_writing(tmp_path):
    path = tmp_path / "results.json"
    atomic.write_json(path, {"runs": [1]})
    with pytest.raises(TypeError, match="cannot write object to JSON"):
        atomic.write_json(path, {"runs": [object()]})
    assert path.read_text() == '{\n  "runs": [\n    1\n  ]\n}\n'


def test_sort_keys_is_the_callers_choice(tmp_path):
    atomic.write_json(tmp_path / "a.json", {"b": 1, "a": 2})
    atomic.write_json(tmp_path / "s.json", {"b": 1, "a": 2}, sort_keys=True)
    assert list(json.loads((tmp_path / "a.json").read_text())) == ["b", "a"]
    assert (tmp_path / "s.json").read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'


def test_failed_directory_keeps_previous_one(tmp_path):
    target = tmp_path / "model"
    with atomic.atomic_dir(target) as staging:
        (staging / "config.json").write_text("old")
    with pytest.raises(RuntimeError, match="export failed"):
        with atomic.atomic_dir(target) as staging:
            (staging / "config.json").write_text("new, half")
            raise RuntimeError("export failed")
    assert (target / "config.json").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    with atomic.atomic_dir(target) as staging:
        (staging / "weights").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["weights"]


def test_zip_and_bytes_round_trip(tmp_path):
    atomic.write_zip(tmp_path / "sub" / "a.zip", {"RTE.tsv": "index\tprediction\n0\tentailment\n"})
    with zipfile.ZipFile(tmp_path / "sub" / "a.zip") as archive:
        assert archive.read("RTE.tsv").decode() == "index\tprediction\n0\tentailment\n"
    atomic.write_bytes(tmp_path / "p.png", b"\x89PNG")
    assert (tmp_path / "p.png").read_bytes() == b"\x89PNG"


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o027])
def test_outputs_follow_the_umask(tmp_path, umask):
    """mkstemp/mkdtemp make 0600/0700 temporaries; what lands must have the modes the umask gives."""
    import os
    import stat

    previous = os.umask(umask)
    try:
        assert atomic.current_umask() == umask
        atomic.write_json(tmp_path / "results.json", {"runs": []})
        atomic.write_zip(tmp_path / "predictions.zip", {"a.tsv": "x"})
        with atomic.atomic_dir(tmp_path / "model") as staging:
            (staging / "model.safetensors").write_bytes(b"w")
            atomic.write_text(staging / "report.md", "# r")
        (tmp_path / "plain.txt").write_text("what open() gives")  # the reference
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (*tmp_path.iterdir(), *(tmp_path / "model").iterdir())}
    assert modes == {"results.json": 0o666 & ~umask, "predictions.zip": 0o666 & ~umask, "model": 0o777 & ~umask,
                     "model.safetensors": 0o666 & ~umask, "report.md": 0o666 & ~umask,
                     "plain.txt": 0o666 & ~umask}
