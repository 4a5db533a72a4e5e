"""electra-harness from Python, for notebooks: the commands' own code path, with results as tables.

    import harness
    run = harness.run("text", model="google/electra-small-discriminator", train="train.csv",
                      text="sentence", label="label", seeds=3, output_dir="runs/text/mine")
    run.to_pandas()          # median, mean, std, best and the 95% interval per task and metric

run, evaluate, compare and report are `harness run`, `eval`, `compare` and `report` (harness/api.py);
bad input raises UserError, one line naming the value and the fix, as the commands print it.
"""

from foundation.infra.errors import UserError
from harness.api import compare, evaluate, report, run
from harness.api_results import Comparison, Results

__all__ = ["Comparison", "Results", "UserError", "compare", "evaluate", "report", "run"]
