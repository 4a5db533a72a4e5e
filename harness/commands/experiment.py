"""`harness experiment efficiency`: ELECTRA against MLM (and ablations) at equal pre-training FLOPs."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from foundation.models.presets import PRESETS
from harness.grid import executors
from harness.tracking import mlflow_runs
from pretrain.config import OBJECTIVES

EPILOG = """examples:
  harness experiment efficiency --preset electra-tiny --corpus ../shared/data/corpus/gutenberg \\
      --budget-flops 1e14,4e14 --objectives electra,mlm --tasks rte,mrpc,stsb,cola --seeds 3 \\
      --data-dir ../shared/data/glue --output runs/experiments/tiny

Each arm pre-trains with `harness pretrain` to its FLOPs budget, then fine-tunes with
`harness run glue`; a random-init discriminator of the same shape and tokenizer is the control.
Rerunning the same command resumes: finished pre-trainings and task x seed fine-tunings are kept,
a killed pre-training resumes from its last checkpoint. The table (efficiency.md/.csv), plot
(efficiency.png) and a `harness report` leaderboard (report/) are rewritten as arms finish.

settings (key=value; prefix pretrain. or finetune.):
  pretrain.KEY   any `harness pretrain` setting except max_flops and objective, e.g.
                 pretrain.learning_rate=1e-3 pretrain.max_time_s=2400 (a safety stop)
  finetune.KEY   any `harness run glue` setting, e.g. finetune.max_train_examples=2000"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("experiment", help="end-to-end experiments (pre-train, fine-tune, report)",
                                   description="Experiments chaining pre-training, fine-tuning and reports.")
    kinds = parser.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    eff = kinds.add_parser(
        "efficiency", help="objectives against each other at equal pre-training FLOPs", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pre-train each objective at each FLOPs budget from the same corpus, tokenizer and "
                    "preset, fine-tune each and an untrained control on GLUE with the same recipe and "
                    "seeds, and write the GLUE-score-against-FLOPs table and plot.")
    eff.add_argument("--preset", default="electra-tiny", choices=[n for n, p in PRESETS.items()
                                                                  if p.family == "electra"],
                     help="discriminator shape (default: %(default)s)")
    eff.add_argument("--corpus", action="append", required=True, metavar="PATH",
                     help="text file or folder for pre-training (repeat for more)")
    eff.add_argument("--budget-flops", required=True, metavar="F[,F...]",
                     help="pre-training FLOPs budgets (paper convention), comma list, e.g. 1e14,4e14")
    eff.add_argument("--objectives", default="electra,mlm",
                     help=f"comma list of {', '.join(OBJECTIVES)} (default: %(default)s)")
    eff.add_argument("--tasks", default="rte,mrpc,stsb,cola", help="GLUE tasks (default: %(default)s)")
    eff.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds per task (default: %(default)s)")
    eff.add_argument("--no-control", action="store_true", help="skip the random-init control")
    eff.add_argument("--data-dir", help="classic glue_data directory (default: $GLUE_DIR, else the Hub)")
    eff.add_argument("--output", type=Path, required=True, metavar="DIR",
                     help="experiment directory (an existing one is resumed)")
    eff.add_argument("--tracking-uri", help=mlflow_runs.TRACKING_HELP)
    # a grid flag (--workers, --executor slurm, ...): pre-train every arm, then fine-tune them as one grid
    executors.add_grid_flags(eff)
    eff.add_argument("overrides", nargs="*", metavar="key=value",
                     help="pretrain.KEY=VALUE or finetune.KEY=VALUE settings")
    eff.set_defaults(handler=handle_efficiency)


def handle_efficiency(args: argparse.Namespace) -> int:
    from foundation.infra.errors import UserError
    from harness.config import load_config
    from harness.experiments.efficiency import Efficiency, diverged_error, run_efficiency
    from tasks.config import FinetuneConfig
    from tasks.registry import parse_tasks

    groups: dict[str, list[str]] = {"pretrain": [], "finetune": []}
    for item in args.overrides:
        prefix, dot, setting = item.partition(".")
        if not dot or prefix not in groups or "=" not in setting:
            raise UserError(f"setting {item!r} must be pretrain.KEY=VALUE or finetune.KEY=VALUE")
        groups[prefix].append(setting)
    exp = Efficiency(
        preset=args.preset, corpus=tuple(args.corpus), budgets=_budgets(args.budget_flops),
        # dev scores only: AX (no dev set) is a server file, not an efficiency column
        objectives=_objectives(args.objectives),
        tasks=tuple(t for t in parse_tasks(args.tasks) if t.predicted_by is None),
        output_dir=args.output, seeds=args.seeds, pretrain_settings=tuple(groups["pretrain"]),
        finetune=load_config(FinetuneConfig, None, groups["finetune"]), data_dir=args.data_dir,
        control=not args.no_control, tracking_uri=args.tracking_uri,
        command=recorded_command(sys.argv[1:]), pool=_pool(args))
    arms = run_efficiency(exp)
    print()
    print((args.output / "efficiency.md").read_text(), end="")
    print(f"\n{len(arms)} arms; table, plot and report in {args.output}")
    error = diverged_error(arms)  # after every table is written: one line and exit 2, as `harness run glue`
    if error is not None:
        raise error
    return 0


def _pool(args: argparse.Namespace):
    """The grid's (settings, executor) where a grid flag was given, else None (fine-tune in turn)."""
    given = executors.grid_values(args)
    if not given:
        return None
    from harness.experiments.efficiency_grid import check

    grid_settings, executor = executors.load_grid(given)
    check(grid_settings, executor)
    return grid_settings, executor


def recorded_command(argv: list[str]) -> str:
    """The command line as typed, for experiment.json and efficiency.json, its passwords as ***; empty
    when called other than as `harness experiment` (by `harness demo`, or a test)."""
    from foundation.infra.secrets import redact_argv

    return shlex.join(["harness", *redact_argv(argv)]) if argv[:1] == ["experiment"] else ""


def _budgets(spec: str) -> tuple[float, ...]:
    from foundation.infra.errors import UserError

    try:
        budgets = tuple(float(item) for item in spec.split(",") if item.strip())
    except ValueError:
        raise UserError(f"--budget-flops {spec!r} is not a comma list of numbers; e.g. 1e14,4e14") from None
    return budgets  # harness.experiments.efficiency.pretrain_configs checks they are positive


def _objectives(spec: str) -> tuple[str, ...]:
    from foundation.infra.errors import UserError

    names = tuple(dict.fromkeys(n.strip() for n in spec.split(",") if n.strip()))
    unknown = [n for n in names if n not in OBJECTIVES]
    if unknown or not names:
        raise UserError(f"unknown objective {', '.join(map(repr, unknown)) or repr(spec)} in --objectives; "
                        f"choose from {', '.join(OBJECTIVES)}")
    return names
