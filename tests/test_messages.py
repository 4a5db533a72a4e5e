"""What a new user reads when a command line, a setting or a resume is wrong: one short line naming the
bad value and the fix, a "did you mean" for a near miss, and help that says what the command does."""

from __future__ import annotations

import pytest

from foundation.infra.errors import UserError
from tests.conftest import run_cli


def test_an_unknown_setting_suggests_the_known_one_it_was_likely_meant_to_be():
    from harness.config import load_config, load_settings
    from tasks.config import FinetuneConfig

    with pytest.raises(UserError, match=r"unknown setting 'lerning_rate' \(did you mean 'learning_rate'\? known: "):
        load_config(FinetuneConfig, None, ["lerning_rate=1e-4"])
    with pytest.raises(UserError, match=r"unknown setting 'lerning_rate' \(did you mean 'learning_rate'\? known: "):
        load_settings((FinetuneConfig,), None, ["lerning_rate=1e-4"])
    with pytest.raises(UserError) as far_off:
        load_config(FinetuneConfig, None, ["zzz=1"])
    assert "did you mean" not in str(far_off.value)


def _parse_error(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as caught:
        run_cli(args, capsys)
    assert caught.value.code == 2
    return capsys.readouterr().err


def test_an_unknown_flag_suggests_the_commands_own_flag(capsys):
    err = _parse_error(["run", "text", "--model", "m", "--trackng-uri", "none"], capsys)
    assert err.splitlines()[-1].endswith("unrecognized arguments: --trackng-uri (did you mean --tracking-uri?)")
    assert "did you mean" not in _parse_error(["report", "--zzzzzz"], capsys)


def test_a_batch_size_of_zero_is_one_clear_line():
    from harness.config import load_config
    from tasks.config import FinetuneConfig

    with pytest.raises(UserError) as caught:
        load_config(FinetuneConfig, None, ["batch_size=0"])
    assert str(caught.value) == "batch_size must be positive (got 0)"
    with pytest.raises(UserError, match="gradient_accumulation_steps=4 would slice a batch of 2"):
        load_config(FinetuneConfig, None, ["batch_size=2", "gradient_accumulation_steps=4"])


def test_serves_bad_json_names_the_place_once():
    from harness.deploy.serve import Rejected, parse_body

    with pytest.raises(Rejected) as caught:
        parse_body(b'["a\nb"]', 10)
    assert "(Invalid control character at line 1 column 4)" in str(caught.value)
    assert "at at" not in str(caught.value)


def test_a_changed_dev_file_is_named_in_one_short_line():
    from harness.finetuning.results_file import setting_differences

    def body(dev_sha: str) -> dict:
        files = {"train": {"source": "/d/train.csv", "sha256": "a" * 64, "rows": 90},
                 "validation": {"source": "/d/dev.csv", "sha256": dev_sha, "rows": 10}}
        return {"format": "f/1", "model": {"path": "/m"}, "config": {},
                "data": {"task": {"name": "t", "metrics": ["accuracy"]}, "description": {"dev": "dev.csv"},
                         "files": files}}

    found = setting_differences(body("b" * 64), body("c" * 64), ("format", "config", "data"))
    assert found == ["the dev file '/d/dev.csv' changed (sha256 bbbbbbbbbbbb… -> cccccccccccc…)"]
    dropped = body("b" * 64)
    del dropped["data"]["files"]["validation"]
    dropped["data"]["description"] = {}
    assert setting_differences(body("b" * 64), dropped, ("data",)) == [
        "data.description.dev: 'dev.csv' -> (absent)", "the dev file '/d/dev.csv' was dropped"]


def test_eval_texts_help_speaks_of_scoring_not_training(capsys):
    with pytest.raises(SystemExit):
        run_cli(["eval", "text", "--help"], capsys)
    shown = capsys.readouterr().out
    assert "optional: the file the checkpoint was fine-tuned on" in shown
    assert "--dev alone is enough" in shown
    for word in ("epoch", "after training", "split to train on", "A run text task's training file"):
        assert word not in shown, word


def test_run_texts_help_keeps_its_verbs(capsys):
    with pytest.raises(SystemExit):
        run_cli(["run", "text", "--help"], capsys)
    shown = " ".join(capsys.readouterr().out.split())
    assert "a resume refuses a changed file, and `harness compare` refuses runs on other data" in shown


def run_help(kind: str, capsys) -> str:
    with pytest.raises(SystemExit):
        run_cli(["run", kind, "--help"], capsys)
    return capsys.readouterr().out


@pytest.mark.parametrize("kind", ["glue", "squad", "tagging", "text"])
def test_run_help_lists_only_the_settings_its_kind_takes(kind, capsys):
    """glue, squad and tagging refuse class_weights and long_text (only your own text reads them): their
    help leaves them out; every kind's help says where each setting is explained, and groups the grid's
    flags and each executor's."""
    shown = run_help(kind, capsys)
    listed = shown.split("settings (key=value")[1]
    for name in ("class_weights", "long_text", "window_overlap"):
        assert (name in listed) == (kind == "text"), (kind, name)
    assert shown.rstrip().endswith(f"what each setting means, its default and its choices: harness settings {kind}")
    assert "long_sentences=" not in shown  # tagging's is a flag, --long-sentences
    groups = [line for line in shown.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert [g.split(" ")[0] for g in groups if g.startswith(("grid", "the local", "Slurm"))] == [
        "grid:", "the", "Slurm"]
    grid = shown.split("\ngrid: ")[1]
    assert grid.index("--executor") < grid.index("\nthe local pool") < grid.index("--workers") \
        < grid.index("\nSlurm (--executor slurm)") < grid.index("--partition")


def test_glue_still_refuses_what_its_help_leaves_out(glue_data, tiny_model, tmp_path, capsys):
    from tests.conftest import glue_args

    code, _, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "class_weights=balanced"),
                           capsys)
    assert code == 2 and "class_weights" in err and err.count("\n") == 1, err
