"""`harness compare RUN_A RUN_B`: paired comparison of two runs on the same dev examples."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """what it does:
  For each task (the ELECTRA paper's metric; SQuAD: EM and F1) and for the GLUE average (paper
  convention), prints A - B with a 95% interval and a two-sided p-value. Both sources of noise
  count: fine-tuning seeds (each run's between-seed variance) and the finite dev set (a bootstrap
  of the dev examples, the same resample scoring both runs, recomputing the metric). The verdict
  is "A better", "B better" or "no detectable difference at this sample size"; "detectable" is the
  smallest true difference the runs would find with 80% power, and the last column the seeds per
  run that would detect --target points (both n/a when nothing varies: every seed of both runs scoring
  the same on every resample). With one seed per run only the dev set is covered.

  Both runs must be `harness run` (or `harness eval`) output directories of the same kind of task
  and tasks, trained and scored on the same data (the files' sha256 where the kind records them) and
  dev examples (ids and gold labels are checked); they need the per-seed dev outputs
  (predictions/TASK-seedN/dev_outputs.json) that `harness run` writes.

examples:
  harness compare runs/glue/electra runs/glue/mlm
  harness compare runs/glue/a runs/glue/b --tasks rte,stsb --target 2 --json
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="is run A better than run B? paired differences with intervals and p-values",
        description="Paired comparison of two runs on the same dev examples and seeds.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_a", type=Path, metavar="RUN_A", help="a `harness run` output directory")
    parser.add_argument("run_b", type=Path, metavar="RUN_B", help="another, on the same tasks and dev sets")
    parser.add_argument("--tasks", help="comma list of tasks to compare (default: all of RUN_A's)")
    parser.add_argument("--target", type=float, default=1.0,
                        help="difference in points (x100 for GLUE) to size seed counts for "
                             "(default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from foundation.infra.errors import UserError
    from harness.experiments.comparison import compare, load_results_folder, table, to_json

    if not 0 < args.target < float("inf"):  # nan too
        raise UserError(f"--target must be a positive, finite number of points (got {args.target})")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    folder_a, folder_b = load_results_folder(args.run_a), load_results_folder(args.run_b)
    if folder_a.path.resolve() == folder_b.path.resolve():  # legal, and a check of the tool, but rarely meant
        print(f"harness: warning: RUN_A and RUN_B are the same run ({folder_a.path}): every difference is 0 "
              "and 'detectable' is only the noise floor; pass two different run directories", file=sys.stderr)
    result = compare(folder_a, folder_b, tasks, args.target)
    print(to_json(result) if args.json else table(result))
    return 0
