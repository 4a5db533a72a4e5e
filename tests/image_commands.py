"""`harness` commands run one after another by one interpreter: python -m tests.image_commands COMMANDS RESULTS.

COMMANDS: a JSON list of [working directory, argument list]; RESULTS: where {"code", "out", "err"} of each
is written as JSON.
For tests/test_tracking_off.py, whose image-like interpreter (benchmarks/image_like) blocks packages: one
interpreter shows that no command imports them, without starting one per command. The micro preset is
registered as tests/pretrain_helpers.py's LAUNCHER does.
"""

import contextlib
import io
import json
import os
import sys

from foundation.models.presets import PRESETS
from tests.conftest import MICRO

PRESETS[MICRO.name] = MICRO

from harness.cli import main  # noqa: E402  (after the preset is registered, as LAUNCHER)

results = []
for cwd, argv in json.loads(open(sys.argv[1]).read()):
    os.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
with open(sys.argv[2], "w") as handle:
    json.dump(results, handle)
