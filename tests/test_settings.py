"""Each setting says what it is once (foundation/infra/settings.py), and the resume rules of both loops,
the legacy defaults, the recipe departures, the choices and --help are read from it."""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from typing import Literal

import pytest

from foundation.infra import atomic
from foundation.infra.errors import UserError
from foundation.infra.settings import Flag, befores, differences, of_role, resumable, setting, settings
from harness.cli import build_parser, main
from harness.config import add_flags, flag_help, flag_values, load_config, load_settings, settings_help
from harness.deploy.serve_config import ServeConfig
from harness.experiments import efficiency
from harness.finetuning import glue_finetuning, records, results_file
from pretrain.config import BUDGETS, PretrainConfig, config_differences, resolve
from reports import results_schema
from reports.recipe import departures
from tasks.config import FinetuneConfig, SquadConfig
from tasks.registry import GLUE_TASKS, SQUAD_TASKS
from tests.conftest import run_cli


@dataclass(frozen=True)
class Toy:
    """A config as a project writes one: each setting is one line."""

    rate: float = setting(0.1, role="recipe", help="what is trained")
    mode: Literal["fast", "exact"] = setting("fast", role="runtime", resumable=True)
    depth: int = setting(2, role="recipe", before=1, help="added later; runs before it had 1")
    out: str = setting("runs", role="output", resumable=True)


def test_adding_a_setting_is_one_line_that_every_rule_reads():
    assert dataclasses.asdict(Toy()) == {"rate": 0.1, "mode": "fast", "depth": 2, "out": "runs"}  # plain data
    assert (of_role(Toy, "recipe"), resumable(Toy)) == (("rate", "depth"), ("mode", "out"))
    assert befores(Toy) == {"rate": 0.1, "mode": "fast", "depth": 1, "out": "runs"}
    # The resume rule: resumable settings may change; an absent key is the setting's value before it existed.
    current = dataclasses.asdict(Toy())
    assert differences(Toy, {"rate": 0.1, "mode": "exact", "out": "elsewhere"}, current) == [("depth", 1, 2)]
    assert differences(Toy, {"rate": 0.1}, dataclasses.asdict(Toy(depth=1))) == []
    assert differences(Toy, {"rate": 0.2}, current, may_change=("rate", "depth")) == []
    # --help: by role, with the choices from the type and the settings a resume may change.
    assert settings_help(Toy, "settings:") == (
        "settings:\n  [recipe: what a run trains and measures]\n  rate=0.1, depth=2\n"
        "  [runtime: how this machine computes it; a resume may change any]\n  mode=fast (fast|exact)\n"
        "  [output: what is written, where and how often; a resume may change any]\n  out=runs")
    with pytest.raises(ValueError, match="unknown setting role 'recipes'; choose one of recipe, runtime"):
        setting(1, role="recipes")


def test_the_real_configs_declare_every_field_and_keep_their_old_meaning():
    # What the five hand-written lists said, now read from the fields (a role changed by mistake shows here).
    assert set(of_role(FinetuneConfig, "runtime", "output")) == {
        "eval_batch_size", "precision", "compile", "save_models", "predict_test", "seed",
        "gradient_accumulation_steps", "trust_remote_code"}
    assert of_role(SquadConfig, "recipe") == tuple(f.name for f in dataclasses.fields(SquadConfig))
    assert set(resumable(PretrainConfig)) == {"output_dir", "log_every_steps", "checkpoint_every_steps",
                                               "checkpoint_every_s", "keep_checkpoints", "cache_dir", "device",
                                               "compile", "compile_optimizer", "gradient_accumulation_steps"}
    assert BUDGETS == ("max_steps", "max_tokens", "max_time_s", "max_flops")
    assert {k: v for k, v in befores(PretrainConfig).items() if v != getattr(PretrainConfig(), k)} == {
        "optimizer": "adamw"}
    assert {k: v for k, v in befores(FinetuneConfig).items() if v != getattr(FinetuneConfig(), k)} == {
        "optimizer": "adamw", "loss_reduction": "mean", "head": "hf", "double_unordered": False}
    assert befores(SquadConfig)["joint_prediction"] is False


def test_the_optimiser_settings_are_one_declaration_both_loops_place_in_their_own_order():
    from typing import get_type_hints

    from foundation.infra.settings import settings
    from foundation.training.optimizer_settings import OptimizerSettings

    shared = settings(OptimizerSettings)
    assert list(shared) == ["optimizer", "weight_decay", "adam_epsilon", "max_grad_norm"]
    for cls in (PretrainConfig, FinetuneConfig):
        mine = settings(cls)
        # the very Setting object, not an equal copy: a second declaration with the same help fails here
        assert [name for name, meaning in shared.items() if mine[name] is not meaning] == []
        assert {name: getattr(cls(), name) for name in shared} == dataclasses.asdict(OptimizerSettings())
        assert {name: get_type_hints(cls)[name] for name in shared} == get_type_hints(OptimizerSettings)
        # in place, where each config had them: results.json, MLflow params and `harness settings` keep order
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[names.index("warmup_fraction") + 1:][:4] == list(shared)
    # both refuse what both optimisers refuse, before a run starts
    for cls in (PretrainConfig, FinetuneConfig):
        with pytest.raises(ValueError, match=r"weight_decay must be 0 or more \(got -0.1\)"):
            cls(weight_decay=-0.1)


def test_choices_come_from_the_literal_types():
    with pytest.raises(ValueError, match=r"unknown optimizer 'sgd'; choose one of electra, adamw"):
        PretrainConfig(optimizer="sgd")
    with pytest.raises(ValueError, match=r"unknown compile 'maybe'; choose one of auto, on, off"):
        PretrainConfig(compile="maybe")
    assert "embedding_sharing 'x'; choose one of shared, untied, tied, gdes" in str(
        pytest.raises(ValueError, PretrainConfig, embedding_sharing="x").value)


def _results(config: FinetuneConfig, model: str = "/m/a") -> results_schema.ResultsBody:
    return records.fresh_results(glue_finetuning.RESULTS_FORMAT, results_schema.ModelBlock(name="a", path=model), config,
                                 ["rte"], 1)


def test_one_resume_rule_for_both_loops_compile_may_change_a_recipe_setting_may_not():
    # Pre-training accepted a changed compile before; fine-tuning refused it. Now both follow the metadata.
    saved = dataclasses.asdict(resolve(PretrainConfig(compile="off")))
    assert config_differences(saved, resolve(PretrainConfig(compile="on"))) == []
    assert config_differences(saved, resolve(PretrainConfig(compile="on", disc_weight=10.0))) == [
        "disc_weight: 50.0 -> 10.0"]
    previous = _results(FinetuneConfig(compile="off"))
    assert results_file.setting_differences(previous, _results(FinetuneConfig(compile="on")), ("format", "config")) \
        == []
    assert results_file.setting_differences(previous, _results(FinetuneConfig(compile="on", num_epochs=2.0)),
                                            ("format", "config")) == ["num_epochs: None -> 2.0"]
    # The runtime settings that change the numbers stay fixed in both loops.
    assert config_differences(saved | {"precision": "bf16"}, resolve(PretrainConfig())) == [
        "precision: 'bf16' -> 'auto'"]
    assert results_file.setting_differences(_results(FinetuneConfig(precision="bf16")), _results(FinetuneConfig()),
                                            ("format", "config")) == ["precision: 'bf16' -> 'auto'"]


def test_results_written_before_a_setting_existed_resume_as_its_before_value(tmp_path):
    fresh = _results(FinetuneConfig(num_epochs=1.0))
    old = _results(FinetuneConfig(num_epochs=1.0))
    for key in ("trust_remote_code", "gradient_accumulation_steps", "predict_test"):
        del old["config"][key]
    results_schema.write(tmp_path / results_schema.FILE, old)
    assert results_file.resume(tmp_path, fresh, ("format", "config"))["config"] == old["config"]
    # head=auto is ELECTRA's head on an ELECTRA model: a file that recorded head=electra resumes...
    assert results_file.setting_differences(_results(FinetuneConfig(head="electra")), _results(FinetuneConfig()),
                                            ("config",)) == []
    # ...but not on a family whose own head auto stands for
    roberta = _results(FinetuneConfig()) | {"model": {"path": "/m/a", "family": "roberta"}}
    assert results_file.setting_differences(_results(FinetuneConfig(head="electra")), roberta, ("config",)) == [
        "head: 'electra' -> 'auto'"]
    # A file from before loss_reduction clipped the batch mean's gradient: a genuinely different recipe.
    del old["config"]["loss_reduction"]
    results_schema.write(tmp_path / results_schema.FILE, old)
    with pytest.raises(UserError) as refused:
        results_file.resume(tmp_path, fresh, ("format", "config"))
    assert str(refused.value) == (f"{str(tmp_path)!r} holds results made with other settings (loss_reduction: "
                                  "'mean' -> 'sum'); resume it with the same settings, or pass a new --output-dir")


def test_squad_settings_block_from_before_joint_prediction():
    settings = dataclasses.asdict(SquadConfig().resolved(SQUAD_TASKS["1.1"]))
    fresh = _results(FinetuneConfig()) | {"settings": settings}
    old = fresh | {"settings": {k: v for k, v in settings.items() if k != "joint_prediction"}}
    assert results_file.setting_differences(old, fresh, ("settings",)) == ["joint_prediction: False -> True"]
    assert results_file.setting_differences(old, old, ("settings",)) == []


@pytest.mark.slow
def test_glue_resume_with_compile_changed_goes_on_and_trains_the_missing_seed(tiny_model, glue_data, tmp_path,
                                                                              capsys):
    out = tmp_path / "out"
    args = ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--output-dir", str(out),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--tasks", "rte", "num_epochs=1",
            "save_models=false", "predict_test=false"]
    assert main(args) == 0
    body = json.loads((out / "results.json").read_text())
    del body["config"]["trust_remote_code"]  # as a version before the setting wrote it
    body["config"]["compile"] = "on"  # as a GPU machine's invocation recorded it
    results_schema.write(out / results_schema.FILE, body)
    assert main([*args, "compile=off", "--seeds", "2"]) == 0, capsys.readouterr().err
    assert "resume rte: kept seed 0 from results.json; training seed 1" in capsys.readouterr().out
    assert [(r["task"], r["seed"]) for r in json.loads((out / "results.json").read_text())["runs"]] == [
        ("rte", 0), ("rte", 1)]
    assert main([*args, "num_epochs=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "with other settings (num_epochs: 1.0 -> 2.0); resume" in err


def _experiment(tmp_path, finetune: FinetuneConfig) -> efficiency.Efficiency:
    return efficiency.Efficiency(preset="electra-tiny", corpus=(str(tmp_path / "corpus.txt"),), budgets=(1e8,),
                                     objectives=("electra",), tasks=(GLUE_TASKS["rte"],), output_dir=tmp_path,
                                     finetune=finetune)


def test_an_experiment_manifest_from_before_a_setting_compares_by_the_same_rule(tmp_path):
    efficiency._check_manifest(_experiment(tmp_path, FinetuneConfig()))
    manifest = json.loads((tmp_path / efficiency.MANIFEST).read_text())
    for key in ("trust_remote_code", "gradient_accumulation_steps", "reinit_layers"):
        del manifest["fixed"]["finetune"][key]
    manifest["fixed"]["finetune"]["compile"] = "on"
    atomic.write_json(tmp_path / efficiency.MANIFEST, manifest)
    efficiency._check_manifest(_experiment(tmp_path, FinetuneConfig()))  # accepted, and rewritten
    del manifest["fixed"]["finetune"]["optimizer"]  # before optimizer existed: torch's AdamW
    atomic.write_json(tmp_path / efficiency.MANIFEST, manifest)
    with pytest.raises(UserError) as refused:
        efficiency._check_manifest(_experiment(tmp_path, FinetuneConfig()))
    assert str(refused.value) == (f"{str(tmp_path)!r} holds an experiment with other finetune (optimizer: "
                                  "'adamw' -> 'electra'); rerun it with the same settings or pass a new --output")


def test_departures_read_the_roles_and_the_before_values():
    def glue(config):
        return {"tasks": ["rte"], "config": dataclasses.asdict(FinetuneConfig()) | config}

    runtime = {"compile": "on", "precision": "fp32", "eval_batch_size": 8, "seed": 4, "save_models": False,
               "predict_test": False, "gradient_accumulation_steps": 4, "trust_remote_code": True}
    assert departures(glue(runtime), "small") == {}
    old = glue({})
    for key in ("head", "double_unordered", "optimizer"):  # a file from before these settings existed
        del old["config"][key]
    assert departures(old, "small") == {"head": "hf", "double_unordered": False, "optimizer": "adamw"}


def _search_space():
    from harness.search.space import SearchSpace

    return SearchSpace


@pytest.mark.parametrize("cls", [PretrainConfig, FinetuneConfig, SquadConfig, ServeConfig, _search_space()])
def test_every_setting_says_what_it_does(cls):
    # `harness settings` prints this line; a setting added without one fails here
    assert [name for name, meaning in settings(cls).items() if not meaning.help] == []


def test_harness_settings_explains_each_setting_from_its_field(capsys):
    from tasks.squad_task import SquadDescription

    code, out, err = run_cli(["settings", "squad"], capsys)
    assert code == 0, err
    listed = [line.split("  (")[0] for line in out.splitlines() if not line.startswith(" ")]
    # its settings, then its task description (the flags and task-file keys)
    assert listed == [f.name for f in (*dataclasses.fields(FinetuneConfig), *dataclasses.fields(SquadConfig),
                                       *dataclasses.fields(SquadDescription))]
    assert "loss_reduction  (recipe; default sum; one of sum|mean; results from before it: mean)" in out
    assert "compile  (runtime; default auto; one of auto|on|off; a resume may change it)" in out
    code, out, _ = run_cli(["settings", "pretrain", "max_flops", "cache_dir"], capsys)
    assert code == 0 and out.splitlines()[0] == "max_flops  (budget; default none)"
    assert out.splitlines()[2] == "cache_dir  (output; default runs/cache; a resume may change it)"


@pytest.mark.parametrize("kind", ["glue", "squad", "text", "tagging"])
def test_harness_settings_explains_every_kinds_task_description(kind, capsys):
    from harness.kinds import KINDS, load

    code, out, err = run_cli(["settings", kind], capsys)
    assert code == 0, err
    listed = [line.split("  (")[0] for line in out.splitlines() if not line.startswith(" ")]
    described = [f.name for f in dataclasses.fields(load(KINDS[kind].description))]
    assert described and listed[-len(described):] == described
    assert listed[0] == "learning_rate"  # the fine-tuning settings first
    flag = {"glue": "--tasks", "squad": "--version", "text": "--train", "tagging": "--task"}[kind]
    assert f"; also {flag}" in out


def test_harness_settings_refuses_an_unknown_name_in_one_line(capsys):
    code, out, err = run_cli(["settings", "glue", "learning_rat"], capsys)
    assert code == 2 and out == ""
    assert err.strip() == ("harness: error: glue has no setting 'learning_rat'; `harness settings glue` lists "
                           "them all")


def test_harness_settings_explains_the_server_and_the_search_space(capsys):
    code, out, err = run_cli(["settings", "serve", "onnx_batch", "access_log"], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == "onnx_batch  (runtime; default 8)"
    assert out.splitlines()[1].startswith("    a batch's encodings run sorted by length in onnxruntime calls")
    assert "access_log  (output; default false)" in out
    code, out, err = run_cli(["settings", "search", "trial_seeds"], capsys)
    assert code == 0 and out.splitlines()[0] == "trial_seeds  (recipe; default 0)", err
    assert out.rstrip().endswith("; also --trial-seeds")


@dataclass(frozen=True)
class Flagged:
    budget: float | None = setting(None, role="budget", flag=Flag("--budget", "N"), help="stop after N")
    mode: Literal["fast", "exact"] = setting("fast", role="runtime", flag=Flag("--mode"), help="how, 100%")
    paths: tuple[str, ...] = setting((), role="recipe", flag=Flag("--path", "P", repeat=True), help="inputs")
    seeds: tuple[int, ...] = setting((0,), role="recipe", flag=Flag("--seeds"), help="seeds")
    depth: int = setting(3, role="recipe", help="key=value only")


def test_a_flag_is_made_from_its_setting():
    parser = argparse.ArgumentParser()
    add_flags(parser, Flagged)
    made = {action.dest: action for action in parser._actions if action.dest != "help"}
    assert list(made) == ["budget", "mode", "paths", "seeds"]  # field order; depth has no flag
    budget = made["budget"]
    assert (budget.option_strings, budget.type, budget.metavar, budget.default, budget.help) == (
        ["--budget"], float, "N", None, "stop after N")  # None: the config's default stands
    assert (made["mode"].choices, made["mode"].help) == (["fast", "exact"], "how, 100%% (default: fast)")
    assert made["seeds"].help == "comma list: seeds (default: 0)"  # a tuple flag takes a comma list...
    args = parser.parse_args(["--budget", "1e3", "--path", "a", "--path", "b,c", "--mode", "exact"])
    assert flag_values(args, Flagged) == {"budget": 1000.0, "mode": "exact", "paths": ("a", "b,c")}  # ...or repeats
    with pytest.raises(SystemExit):
        parser.parse_args(["--budget", "many"])


@dataclass(frozen=True)
class Renamed:
    shape: Literal["a", "b"] = setting("a", role="recipe", formerly=("form",),
                                       flag=Flag("--shape", deprecated=("--form",)), help="its shape")
    paths: tuple[str, ...] = setting((), role="recipe", formerly=("files",),
                                     flag=Flag("--path", repeat=True, deprecated=("--file",)), help="inputs")


def test_a_former_name_still_sets_its_setting_with_one_line_of_warning(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_flags(parser, Renamed)
    assert "--form" not in parser.format_help() and "--file" not in parser.format_help()
    args = parser.parse_args(["--file", "x", "--form", "b", "--path", "y"])
    assert flag_values(args, Renamed) == {"shape": "b", "paths": ("x", "y")}  # appended alike, by either name
    assert capsys.readouterr().err.splitlines() == ["harness: warning: --file is deprecated; use --path",
                                                    "harness: warning: --form is deprecated; use --shape"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--form", "c"])  # the former flag takes what the flag takes
    capsys.readouterr()
    toml = tmp_path / "c.toml"
    toml.write_text('form = "b"\nfiles = ["x"]\n')
    assert load_config(Renamed, toml) == Renamed("b", ("x",))
    assert capsys.readouterr().err.splitlines() == ["harness: warning: setting form is deprecated; use shape",
                                                    "harness: warning: setting files is deprecated; use paths"]
    assert load_config(Renamed, toml, ["shape=a"]).shape == "a"  # key=value wins over the file by either name
    with pytest.raises(UserError, match="^form and shape are one setting; give only shape$"):
        load_config(Renamed, None, ["form=a", "shape=b"])
    assert load_settings((Toy, Renamed), None, ["form=b", "rate=0.5"])[1].shape == "b"
    with pytest.raises(UserError, match=r"unknown setting 'formm' \(known: depth, mode, out, paths, rate, shape\)"):
        load_settings((Toy, Renamed), None, ["formm=b"])


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) of the harness command line and all its subcommands."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_no_command_restates_a_settings_help_and_every_flag_is_made_from_its_setting():
    configs = (PretrainConfig, FinetuneConfig, SquadConfig, ServeConfig, _search_space())
    described = [(cls, name, meaning) for cls in configs for name, meaning in settings(cls).items()]
    actions = [(path, action) for path, parser in _parsers(build_parser()) for action in parser._actions]
    restated = [f"harness {' '.join(path)} {'/'.join(action.option_strings) or action.dest}: {cls.__name__}.{name}"
                for path, action in actions for cls, name, meaning in described
                if action.help and (action.help == meaning.help or (len(meaning.help.split()) >= 4
                                                                    and meaning.help in action.help))
                and not (action.dest == name and action.help == flag_help(cls, name).replace("%", "%%"))]
    assert restated == []  # a flag restating a setting: declare it with setting(flag=Flag(...)) instead
    flags = {(cls, name): meaning.flag for cls, name, meaning in described if meaning.flag}
    assert {(cls.__name__, name) for cls, name in flags} == {
        ("PretrainConfig", name) for name in ("preset", "corpus", "output_dir", "objective", "max_flops")} | {
        ("SearchSpace", "trial_seeds")}
    for (cls, name), flag in flags.items():  # each is on some command, its help the setting's
        assert any(action.option_strings == [flag.name] and action.dest == name
                   and settings(cls)[name].help.replace("%", "%%") in action.help
                   for _, action in actions), name
    max_flops = next(action for path, action in actions if path == ("pretrain",) and action.dest == "max_flops")
    assert (max_flops.type, max_flops.metavar) == (float, "N")
