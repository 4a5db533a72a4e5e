"""`harness run KIND`: fine-tune a discriminator on a kind of task (harness/kinds.py), report dev scores."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from harness import kinds
from harness.config import settings_help
from harness.grid.executors import add_grid_flags
from harness.tracking import mlflow_runs


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="fine-tune and evaluate on a kind of task",
                                   description="Fine-tune a discriminator on a kind of task.")
    for kind, sub in kinds.add_kind_parsers(parser, "run", _epilog):
        common_arguments(sub, kind.name, models=True)
        kinds.add_description_flags(sub, kind, "run")
        add_grid_flags(sub)
        sub.add_argument("--params-from", metavar="STUDY_OR_FILE",
                         help="the best trial of a harness search: its best_params.json, STORAGE_URL#STUDY "
                              "or a study in runs/optuna.db; key=value overrides still win. Re-measures it "
                              "on seeds the search never used, printed beside its search score")
        sub.set_defaults(handler=handle)


def _epilog(kind: kinds.Kind, text) -> str:
    """The kind's examples and notes, then the settings it accepts (key=value or --config), and where each
    is explained."""
    refused = getattr(kinds.load(kind.description), "refused", ())
    blocks = [settings_help(cls, heading, skip=refused)
              for cls, heading in zip(kinds.settings_classes(kind), text.settings, strict=True)]
    return (text.epilog + "\n" + "\n".join(blocks)
            + f"\nwhat each setting means, its default and its choices: harness settings {kind.name}")


def common_arguments(parser, where: str, seeds: bool = True, models: bool = False) -> None:
    """The arguments every run of a kind takes: model, seeds (not harness eval's), settings, outputs,
    tracking; `where`: the folder under runs/ that outputs default to; `models`: --model repeatable (a
    grid)."""
    what = ("Hugging Face Hub id (org/name[@revision]; offline, from the Hub cache), checkpoint directory, "
            "harness pretrain output, or registry name (harness models)")
    if models:
        parser.add_argument("--model", required=True, action="append", help=(
            f"{what}. Repeat it, or give a quoted glob or @FILE (one model a line), for a grid of models, "
            "each into OUTPUT_DIR/NAME: every checkpoint of a pre-training is 'runs/pretrain/X/checkpoints/"
            "step-*' (keep_checkpoints=N keeps N), every budget of an experiment "
            "'runs/experiments/E/pretrain/*'"))
    else:
        parser.add_argument("--model", required=True, help=what)
    if seeds:
        parser.add_argument("--seeds", type=int, default=1,
                            help="fine-tunings per task; the table reports median, mean, std, best")
    parser.add_argument("--config", help="TOML file of settings (see below)")
    parser.add_argument("--output-dir", type=Path,
                        help=f"where results go (default: runs/{where}/MODEL-TIME; several models: "
                        f"runs/{where}/grid-TIME, a folder per model); an existing one is resumed")
    parser.add_argument("--tracking-uri", help=mlflow_runs.TRACKING_HELP)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="setting overrides")


def handle(args) -> int:
    from harness.config import load_settings
    from harness.grid import plan, start

    kind = kinds.kind(args.kind)
    models = plan.expand_models(args.model)
    description, base = kinds.load_description(kind, args)
    params, origin = _searched(args)
    settings = load_settings(kinds.settings_classes(kind), args.config, params + args.overrides)
    settings = (_fresh_seeds(settings[0], args, origin), *settings[1:])
    if start.wanted(args, models, description, settings):
        root = default_output(Path("runs") / kind.name, "grid" if len(models) > 1 else models[0],
                              description.output_name)
        return start.run(args, kind.name, models, description, base, settings, root)
    # torch and transformers load only now: a typo in the settings is reported in well under a second
    from harness.finetuning.kind_runner import Job

    runner = kinds.load(kind.runner)
    output_dir = args.output_dir or default_output(Path("runs") / kind.name, models[0],
                                                   description.output_name)
    results = runner.run(Job(model=models[0], description=description, settings=settings,
                             output_dir=output_dir, seeds=args.seeds, task_file_dir=base,
                             tracking_uri=args.tracking_uri, search=origin))
    if results is None:  # a torchrun process but rank 0, which reports
        return 0
    print(runner.summary(results))
    _remeasured(results, origin)
    print(f"\nresults: {output_dir / 'results.json'}")
    return _diverged(results)


def default_output(folder: Path, model: str, name: str) -> Path:
    """FOLDER/MODEL[-NAME]-TIME: a fresh output folder per invocation."""
    return folder / "-".join([Path(model).name, *([name] if name else []), f"{datetime.now():%Y%m%d-%H%M%S}"])


def _searched(args) -> tuple[list[str], dict | None]:
    """--params-from's key=value settings (a search's best trial) and results.json's `search` block."""
    if not args.params_from:
        return [], None
    from harness.search.study import params_from

    params, source, origin = params_from(args.params_from, args.kind)
    print(f"settings from {source}: {' '.join(params)}")
    if "note" in origin:
        print(f"note: {origin['note']}")
    return params, origin


def _fresh_seeds(config, args, origin: dict | None):
    if origin is None:
        return config
    from harness.search.remeasure import fresh_config

    return fresh_config(config, args.seeds, origin)


def _remeasured(results: dict, origin: dict | None) -> None:
    if origin is not None:
        from harness.search.remeasure import report

        print("\n" + report(results, origin))


def _diverged(results: dict) -> int:
    """0, or the diverged seeds as one UserError line and a non-zero exit, after every output is written."""
    from harness.finetuning.records import diverged_error

    error = diverged_error(results.get("diverged") or [])
    if error is not None:
        raise error
    return 0
