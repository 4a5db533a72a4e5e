"""Config files and key=value overrides fill the frozen dataclasses, and reject what is wrong."""

import pytest

from foundation.infra.errors import UserError
from harness.config import load_config
from pretrain.config import PretrainConfig
from tasks.config import FinetuneConfig, SquadConfig, fit_max_length


def test_overrides_are_typed_and_beat_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('learning_rate = 1e-4\nbatch_size = 16\nprecision = "fp32"\n')
    config = load_config(FinetuneConfig, path, ["batch_size=8", "group_by_length=false", "num_epochs=2.5"])
    assert (config.learning_rate, config.batch_size, config.precision) == (1e-4, 8, "fp32")
    assert config.group_by_length is False and config.num_epochs == 2.5
    assert config.layerwise_lr_decay is None  # untouched: the recipe fills it by model size


def test_every_problem_reported_at_once():
    with pytest.raises(UserError) as caught:
        load_config(FinetuneConfig, None, ["lerning_rate=1", "batch_size=many", "precision=fp8", "oops"])
    message = str(caught.value)
    assert "unknown setting 'lerning_rate'" in message and "learning_rate" in message
    assert "batch_size='many'" in message and "precision='fp8'" in message and "'oops'" in message


def test_type_and_range_errors_reported_together(tmp_path):
    with pytest.raises(UserError) as caught:
        load_config(FinetuneConfig, None, ["batch_size=many", "warmup_fraction=2", "lerning_rate=1"])
    assert str(caught.value) == ("setting batch_size='many': expected a finite number (int); unknown setting "
                                 "'lerning_rate' (did you mean 'learning_rate'? known: "
                                 + ", ".join(sorted(FinetuneConfig.__dataclass_fields__))
                                 + "); warmup_fraction must be between 0 and 1 (got 2.0)")
    path = tmp_path / "c.toml"
    path.write_text('mask_prob = "lots"\nwarmup_fraction = 2\n')
    with pytest.raises(UserError, match=r"setting mask_prob='lots': expected a finite number \(float\); "
                                        r"warmup_fraction=2.0 must be between 0 and 1"):
        load_config(PretrainConfig, path)


def test_invalid_values_and_missing_file(tmp_path):
    with pytest.raises(UserError, match="batch_size must be positive"):
        load_config(FinetuneConfig, None, ["batch_size=0"])
    with pytest.raises(UserError, match="warmup_fraction must be between 0 and 1"):
        load_config(FinetuneConfig, None, ["warmup_fraction=2"])
    with pytest.raises(UserError, match=r"reinit_layers must be 0 or more \(got -1\)"):
        load_config(FinetuneConfig, None, ["reinit_layers=-1"])
    with pytest.raises(UserError, match="does not exist"):
        load_config(FinetuneConfig, tmp_path / "missing.toml")


@pytest.mark.parametrize("cls, setting", [
    (FinetuneConfig, "learning_rate"), (FinetuneConfig, "warmup_fraction"), (FinetuneConfig, "max_grad_norm"),
    (SquadConfig, "null_threshold"), (SquadConfig, "holdout_fraction"), (PretrainConfig, "max_flops"),
    (PretrainConfig, "mask_prob"), (PretrainConfig, "max_time_s")])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_floats_are_refused(cls, setting, value, tmp_path):
    """nan passes every `<= 0` and `0 <= x <= 1` check, then breaks torch; refuse it in the parser."""
    with pytest.raises(UserError, match=f"setting {setting}='{value}': expected a finite number"):
        load_config(cls, None, [f"{setting}={value}"])
    path = tmp_path / "c.toml"
    path.write_text(f"{setting} = {value}\n")  # TOML's own nan and inf
    with pytest.raises(UserError, match=f"setting {setting}=.*: expected a finite number"):
        load_config(cls, path)


def test_non_finite_search_ranges_and_flags_are_refused():
    from harness.search.space import SearchSpace

    with pytest.raises(UserError, match="setting weight_decay='0,nan': expected a finite number"):
        load_config(SearchSpace, None, ["weight_decay=0,nan"])
    with pytest.raises(UserError, match="max_flops=nan must be a finite number"):
        load_config(PretrainConfig, None, [], max_flops=float("nan"))  # as --max-flops nan passes it
    with pytest.raises(UserError, match="setting batch_size='inf': expected a finite number"):
        load_config(FinetuneConfig, None, ["batch_size=inf"])  # int(float('inf')) overflows


def test_recipe_by_size_and_task():
    base = FinetuneConfig()
    assert base.resolved("small", 10) == FinetuneConfig(learning_rate=3e-4, layerwise_lr_decay=0.8, num_epochs=10)
    assert base.resolved("large", 3).layerwise_lr_decay == 0.9
    assert base.resolved("base", 3).learning_rate == 1e-4
    assert FinetuneConfig(learning_rate=1e-3).resolved("small", 3).learning_rate == 1e-3


def test_max_length_fits_the_models_positions_by_one_rule():
    # A length the user set is kept, or refused beyond the positions; the task's own is cut to them.
    assert fit_max_length(48, 128, 64) == 48 and fit_max_length(64, 128, 64) == 64
    with pytest.raises(UserError, match=r"^max_length 128 exceeds the model's 64 positions; pass max_length=64 "
                                        r"or less$"):
        fit_max_length(128, 512, 64)
    assert fit_max_length(None, 128, 64) == 64 and fit_max_length(None, 128, 512) == 128
    # SQuAD refuses its own where it is longer, and takes a shorter one as it is.
    with pytest.raises(UserError, match=r"^max_length 512 exceeds the model's 64 positions"):
        fit_max_length(None, 512, 64, longer="refuse")
    assert fit_max_length(None, 128, 512, longer="refuse") == 128
    with pytest.raises(UserError, match=r"^max_length 128 exceeds"):
        fit_max_length(128, 128, 64, longer="refuse")
    # A model that names no positions is not checked.
    assert fit_max_length(None, 128, None) == 128 and fit_max_length(1024, 128, None) == 1024


def test_help_epilog_is_read_from_the_dataclass():
    from dataclasses import dataclass
    from typing import Literal

    from harness.config import settings_help

    @dataclass(frozen=True)
    class Settings:
        rate: float | None = None
        mode: Literal["fast", "exact"] = "fast"
        pairs: bool = True
        name: str = ""
        skipped: int = 3

    text = settings_help(Settings, "settings:", skip=("skipped",))
    assert text == 'settings:\n  rate, mode=fast (fast|exact), pairs=true, name=""'


def test_every_setting_of_the_real_configs_is_in_the_help():
    import re
    from dataclasses import fields

    from harness import kinds
    from harness.commands import pretrain, run
    from pretrain.config import PretrainConfig

    def listed(epilog):  # the names at the start of each comma-separated item
        return set(re.findall(r"(?:^  |, )([a-z_0-9]+)(?=[=, (]|,?$)", epilog, flags=re.M))

    for kind in kinds.KINDS.values():  # each kind's settings classes, in its `harness run KIND --help`
        description = kinds.load(kind.description)
        epilog = run._epilog(kind, description.commands["run"])
        accepted = {f.name for cls in kinds.settings_classes(kind) for f in fields(cls)} - set(
            getattr(description, "refused", ()))  # a setting the kind refuses is left out of its help
        assert accepted <= listed(epilog), kind.name
    assert "doc_stride" in listed(run._epilog(kinds.KINDS["squad"], kinds.load(kinds.KINDS["squad"].description)
                                              .commands["run"]))
    flagged = {"preset", "corpus", "output_dir", "objective"}  # set by --flags, listed there
    assert listed(pretrain.EPILOG) >= {f.name for f in fields(PretrainConfig)} - flagged


def test_squad_defaults_are_electras():
    from tasks.config import SquadConfig
    from tasks.registry import SQUAD_TASKS

    # configure_finetuning.py: max_seq_length 512 for SQuAD, doc_stride 128, qa_na_threshold -2.75 on the
    # answerable classifier's null odds; answerable_classifier and joint_prediction on, for v1.1 too
    assert SQUAD_TASKS["1.1"].max_length == SQUAD_TASKS["2.0"].max_length == 512
    v2 = SquadConfig().resolved(SQUAD_TASKS["2.0"])
    assert (v2.doc_stride, v2.answerability_head, v2.null_threshold) == (128, True, -2.75)
    # without the classifier the null odds are a [CLS]-minus-best-span difference, thresholded at 0
    assert SquadConfig(answerability_head=False).resolved(SQUAD_TASKS["2.0"]).null_threshold == 0.0
    assert SquadConfig(null_threshold=1.5).resolved(SQUAD_TASKS["2.0"]).null_threshold == 1.5
    v1 = SquadConfig().resolved(SQUAD_TASKS["1.1"])
    assert (v1.answerability_head, v1.joint_prediction, v2.joint_prediction) == (True, True, True)
