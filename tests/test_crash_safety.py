"""Crash safety (issue 49 item 4): what a kill, a host crash or a second writer leaves behind is never
trusted half-written, and a resume goes on from the newest whole checkpoint, saying which.

The faults are injected where they bite: a process killed between replace_dir's two renames, two
writers racing for one folder, a newest step-N cut short or emptied, a damaged pretrain_meta.json.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from foundation.infra import atomic
from foundation.infra.errors import UserError
from pretrain import checkpoint as ckpt
from pretrain.config import resolve
from pretrain.planning import Plan
from pretrain.train import pretrain
from tests.pretrain_helpers import final_weights, micro_config

ROOT = Path(__file__).resolve().parent.parent


def _folder(target: Path, text: str) -> None:
    with atomic.atomic_dir(target) as staging:
        (staging / "config.json").write_text(text)
        (staging / "sub").mkdir()
        (staging / "sub" / "weights").write_text(text * 3)


def _contents(target: Path) -> tuple[str, str]:
    return (target / "config.json").read_text(), (target / "sub" / "weights").read_text()


def test_a_file_is_fsynced_before_its_rename_and_its_folder_after(tmp_path, monkeypatch):
    events = []
    monkeypatch.setattr(atomic, "fsync_file", lambda path: events.append(("fsync", Path(path).parent.name)))
    monkeypatch.setattr(atomic, "fsync_dir", lambda path: events.append(("fsync dir", Path(path).name)))
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("rename", Path(b).name)), real_replace(a, b)))
    atomic.write_text(tmp_path / "results.json", "{}")
    assert events == [("fsync", tmp_path.name), ("rename", "results.json"), ("fsync dir", tmp_path.name)]


def test_a_folders_files_are_fsynced_before_it_is_renamed_in(tmp_path, monkeypatch):
    flushed, renamed = [], []
    real_fsync, real_rename = atomic.fsync_file, os.rename
    monkeypatch.setattr(atomic, "fsync_file", lambda path: (flushed.append(Path(path).name), real_fsync(path)))
    monkeypatch.setattr(os, "rename", lambda a, b: (renamed.append(sorted(flushed)), real_rename(a, b)))
    _folder(tmp_path / "model", "new")
    assert renamed == [["config.json", "weights"]]  # both files on disk before the one rename


def test_an_error_between_the_two_renames_puts_the_old_folder_back(tmp_path, monkeypatch):
    """A second Ctrl-C (KeyboardInterrupt) after the old folder went aside, before the new one landed."""
    target = tmp_path / "model"
    _folder(target, "old")
    real_rename = os.rename

    def interrupted(source, destination):
        if Path(source).name.startswith(".model.tmp-") and Path(destination) == target and \
                any(p.name.startswith(".model.old-") for p in tmp_path.iterdir()):
            raise KeyboardInterrupt
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _folder(target, "new")
    assert _contents(target) == ("old", "oldoldold")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary or old folder left


KILLED_BETWEEN_RENAMES = """
import os, sys
from pathlib import Path
from pretrain.config import resolve
from foundation.infra import atomic
target = Path(sys.argv[1])
real_rename = os.rename
def rename(source, destination):
    real_rename(source, destination)
    if Path(destination).name.startswith(".model.old-"):  # the old folder is aside: die at once
        os._exit(9)
os.rename = rename
with atomic.atomic_dir(target) as staging:
    (staging / "config.json").write_text("new")
"""


def test_a_kill_between_the_two_renames_leaves_the_old_folder_for_the_next_reader(tmp_path):
    target = tmp_path / "model"
    _folder(target, "old")
    killed = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(target)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    assert not target.exists()  # the moment the issue is about: the old folder is aside, not gone
    assert atomic.recover_dir(target) is True
    assert _contents(target) == ("old", "oldoldold")
    _folder(target, "newer")  # the next writer finds it in place and replaces it as usual
    assert _contents(target) == ("newer", "newernewernewer")
    assert not any(p.name.startswith(".model.old-") for p in tmp_path.iterdir())


@pytest.mark.parametrize("second, winner", [("replace_dir", "B"), ("atomic_dir", "A")])
def test_a_second_writer_in_the_gap_between_the_renames(tmp_path, monkeypatch, second, winner):
    """Writer A has moved the old folder aside; writer B publishes before A's second rename. With
    replace_dir, B's folder lands in the gap: A finds it there and yields. atomic_dir first puts A's old
    folder back (recover_dir) and replaces that: A, finding its old folder gone, goes round again. One
    wins either way; no exception, no folder left over."""
    target = tmp_path / "model"
    _folder(target, "old")
    real_rename = os.rename

    def racing(source, destination):
        if Path(source).name.startswith(".model.tmp-") and Path(destination) == target and not target.exists():
            monkeypatch.setattr(os, "rename", real_rename)
            if second == "atomic_dir":
                _folder(target, "B")
            else:
                (tmp_path / ".model.tmp-B" / "sub").mkdir(parents=True)
                (tmp_path / ".model.tmp-B" / "config.json").write_text("B")
                (tmp_path / ".model.tmp-B" / "sub" / "weights").write_text("BBB")
                atomic.replace_dir(tmp_path / ".model.tmp-B", target)
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", racing)
    _folder(target, "A")
    assert _contents(target) == (winner, winner * 3)
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


WRITER = """
import sys
from pathlib import Path
from pretrain.config import resolve
from foundation.infra import atomic
target, me = Path(sys.argv[1]), sys.argv[2]
for round in range(40):
    with atomic.atomic_dir(target) as staging:
        (staging / "a").write_text(f"{me} {round}")
        (staging / "b").write_text(f"{me} {round}")
"""


def test_writers_racing_for_one_folder_never_fail_or_leak(tmp_path):
    target = tmp_path / "model"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(n)], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
               for n in range(3)]
    errors = [(writer.wait(timeout=60), writer.stderr.read()) for writer in writers]
    assert errors == [(0, "")] * 3
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert sorted(p.name for p in target.iterdir()) == ["a", "b"]
    assert (target / "a").read_text() == (target / "b").read_text()  # one writer's folder, whole


# Resume -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, corpus):
    """A micro pre-training of 4 steps with checkpoints at 2 and 4 (keep_checkpoints=2): the folder."""
    from foundation.models.presets import PRESETS
    from tests.conftest import MICRO

    PRESETS[MICRO.name] = MICRO
    try:
        tmp = tmp_path_factory.mktemp("run")
        config = micro_config(tmp, corpus, max_steps=4, checkpoint_every_steps=2, log_every_steps=1)
        pretrain(config)
    finally:
        PRESETS.pop(MICRO.name, None)
    return config


def _copy(config, tmp_path):
    import shutil

    shutil.copytree(config.output_dir, tmp_path / "out")
    return resolve(dataclasses.replace(config, output_dir=str(tmp_path / "out")))


def test_a_cut_short_newest_checkpoint_is_passed_over_for_the_previous_one(tmp_path, micro, finished_run):
    from harness.pretraining.orchestration import resume_lines

    config = _copy(finished_run, tmp_path)
    out = Path(config.output_dir)
    state = out / "checkpoints" / "step-4" / "training_state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])  # what a host crash can leave
    resume = ckpt.resume_point(out, config)
    assert resume.folder == out / "checkpoints" / "step-2"
    lines = resume_lines(Plan(config, None, resume))
    assert lines == [f"note: checkpoint {str(out / 'checkpoints' / 'step-4')!r} is damaged (training_state.pt "
                     f"is cut short or not a torch.save file ({state.stat().st_size} bytes)); going on from "
                     "the previous one kept, step-2",
                     f"resume {out}: from step 2 ({out / 'checkpoints' / 'step-2'})"]
    pretrain(config)  # steps 3 and 4 again, exactly as the first time (resume is exact)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2", "step-4"]
    expected, got = final_weights(Path(finished_run.output_dir)), final_weights(out)
    assert [k for k in expected if not torch.equal(expected[k], got[k])] == []
    assert ckpt.resume_point(out, config).folder == out / "checkpoints" / "step-4"


@pytest.mark.parametrize("damage, reason", [
    (lambda step: (step / "training_state.pt").write_bytes(b""), "training_state.pt is cut short or not a "
                                                                 "torch.save file (0 bytes)"),
    (lambda step: (step / "training_state.pt").unlink(), "no training_state.pt"),
    (lambda step: (step / "pretrain_meta.json").write_text('{"config": {"preset"'),
     "pretrain_meta.json is not readable JSON"),
    (lambda step: (step / "pretrain_meta.json").write_text("[]"), "pretrain_meta.json lacks the run's config "
                                                                  "or counters"),
    (lambda step: (step / "discriminator" / "model.safetensors").unlink(),
     "discriminator/ lacks its config or weights, or they are cut short"),
])
def test_each_kind_of_damage_falls_back_and_with_no_whole_one_is_one_line(tmp_path, micro, finished_run,
                                                                         damage, reason):
    config = _copy(finished_run, tmp_path)
    out = Path(config.output_dir)
    damage(out / "checkpoints" / "step-4")
    resume = ckpt.resume_point(out, config)
    assert (resume.folder.name, resume.skipped) == \
        ("step-2", (f"checkpoint {str(out / 'checkpoints' / 'step-4')!r} is damaged ({reason})",))
    damage(out / "checkpoints" / "step-2")
    with pytest.raises(UserError) as caught:
        ckpt.resume_point(out, config)
    assert str(caught.value) == (
        f"{str(out)!r} cannot be resumed: none of its 2 checkpoints is whole; checkpoint "
        f"{str(out / 'checkpoints' / 'step-4')!r} is damaged ({reason}); delete {str(out / 'checkpoints')!r} "
        "to start that run afresh, or choose a new --output")


def test_a_checkpoint_left_aside_by_a_killed_replace_is_put_back(tmp_path, micro, finished_run):
    config = _copy(finished_run, tmp_path)
    out = Path(config.output_dir)
    os.rename(out / "checkpoints" / "step-4", out / "checkpoints" / ".step-4.old-123-abcd")
    assert ckpt.resume_point(out, config).folder == out / "checkpoints" / "step-4"


def test_a_damaged_state_that_passes_the_check_is_still_one_line(tmp_path, micro, finished_run):
    config = _copy(finished_run, tmp_path)
    path = Path(config.output_dir) / "checkpoints" / "step-4" / "training_state.pt"
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:  # a whole zip, but not what torch.save writes
        archive.writestr("x/data.pkl", b"not a pickle")
    with pytest.raises(UserError, match=r"training_state.pt' cannot be read \(.*\); delete its folder to resume "
                                        r"from the checkpoint before it, or start a new --output$"):
        ckpt.load_state(path.parent)


# Names read from files (issue 49 item 5) -----------------------------------------------------------


def _index(folder: Path, *names: str) -> Path:
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {f"w{i}": name for i, name in enumerate(names)}}))
    return folder


def _weights(path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"w": np.zeros((2, 3), dtype=np.float32)}, str(path))


@pytest.mark.parametrize("name, reason", [("../x.safetensors", "a '..' in it"),
                                          ("/etc/passwd", "an absolute path"),
                                          ("sub/../../x.safetensors", "a '..' in it"),
                                          (7, "not a file name")])
def test_a_weights_index_naming_a_file_outside_its_folder_is_one_line(tmp_path, name, reason):
    from foundation.models.checkpoint_check import weight_shapes

    _weights(tmp_path / "x.safetensors")  # it exists: only the name stops it
    folder = _index(tmp_path / "model", "model-1.safetensors", name)
    _weights(folder / "model-1.safetensors")
    with pytest.raises(UserError) as caught:
        weight_shapes(folder)
    index = folder / "model.safetensors.index.json"
    assert str(caught.value) == (f"{str(index)!r} names the file {name!r}, which lies outside its folder "
                                 f"({reason}); copy or download the checkpoint again (or save it again with "
                                 "save_pretrained())")


def test_a_weights_index_may_not_follow_a_symlink_out_except_into_a_hub_caches_blobs(tmp_path):
    from foundation.models.checkpoint_check import weight_shapes

    _weights(tmp_path / "elsewhere.safetensors")
    folder = _index(tmp_path / "model", "model-1.safetensors")
    (folder / "model-1.safetensors").symlink_to(tmp_path / "elsewhere.safetensors")
    with pytest.raises(UserError, match=r"lies outside its folder \(a symlink to .*elsewhere.safetensors'\)"):
        weight_shapes(folder)
    # The Hub cache's own layout: snapshots/<revision>/NAME -> ../../blobs/<hash>
    repo = tmp_path / "models--org--name"
    _weights(repo / "blobs" / "abc123")
    snapshot = _index(repo / "snapshots" / "0123abcd", "model-1.safetensors")
    (snapshot / "model-1.safetensors").symlink_to("../../blobs/abc123")
    assert weight_shapes(snapshot) == {"w": (2, 3)}


def test_harness_pretrain_says_which_checkpoint_it_resumes_from(tmp_path, micro, corpus, capsys):
    from harness.cli import main
    from tests.pretrain_helpers import pretrain_args

    args = [a if not a.startswith("sqlite:") else "none"
            for a in pretrain_args(tmp_path, corpus, "max_steps=2", "checkpoint_every_steps=1")]
    assert main(args) == 0
    out = tmp_path / "out"
    (out / "checkpoints" / "step-2" / "training_state.pt").write_bytes(b"")
    capsys.readouterr()
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"note: checkpoint {str(out / 'checkpoints' / 'step-2')!r} is damaged (training_state.pt "
                         "is cut short or not a torch.save file (0 bytes)); going on from the previous one kept, "
                         "step-1",
                         f"resume {out}: from step 1 ({out / 'checkpoints' / 'step-1'})"]
    capsys.readouterr()
    assert main(args) == 0  # finished: resumed from its last checkpoint, which it says, and nothing trained
    assert capsys.readouterr().out.splitlines()[0] == f"resume {out}: from step 2 ({out / 'checkpoints' / 'step-2'})"


def test_a_damaged_fine_tuning_seed_state_is_one_line_naming_the_fix(tmp_path):
    """Refused, not started afresh: deleting a seed's state is the user's call; the line says how."""
    from foundation.training.rng import rng_state
    from tasks.finetune_state import SeedState

    path = tmp_path / "checkpoints" / "rte-seed0.pt"
    path.parent.mkdir()
    whole = {"format": 1, "identity": {"learning_rate": 2e-3}, "resumes": [], "point": {"epoch": 1, "step": 7},
             "rng": rng_state(), "epoch_order": torch.Generator().get_state()}
    torch.save(whole, path)
    assert SeedState(path, {"learning_rate": 2e-3}).resumes == [{"epoch": 1, "step": 7}]
    cases = {"empty": (b"", "is not a readable fine-tuning state (EOFError)"),
             "cut short": (path.read_bytes()[:600], "is not a readable fine-tuning state (RuntimeError)"),
             "no point": (whole | {"point": None}, "is a damaged fine-tuning state (its point is missing or "
                                                   "malformed)"),
             "foreign point": (whole | {"point": {"epochs": 1}}, "is a damaged fine-tuning state (its point is "
                                                                 "missing or malformed)"),
             "bare": ({"format": 1}, "is a damaged fine-tuning state (its identity, point, resumes, rng, "
                                     "epoch_order are missing or malformed)")}
    for written, reason in cases.values():
        if isinstance(written, bytes):
            path.write_bytes(written)
        else:
            torch.save(written, path)
        with pytest.raises(UserError) as caught:
            SeedState(path, {"learning_rate": 2e-3})
        assert str(caught.value).startswith(f"{str(path)!r} {reason}")
        assert str(caught.value).endswith("; delete it to train that seed afresh")
