"""Make the packages named in HARNESS_BLOCK_IMPORTS unimportable, as on an image that lacks them.

Put this folder first on PYTHONPATH and set HARNESS_BLOCK_IMPORTS=mlflow,optuna: every Python process
started with that environment (subprocesses too) then fails `import mlflow` with ModuleNotFoundError
and `importlib.util.find_spec("mlflow")` returns None, as on the GPU image (it has no mlflow, optuna,
datasets or evaluate). Used by tests/test_tracking_off.py and the `micro` plan of benchmarks/gpu_check.sh
to rehearse the image on a CPU without uninstalling anything.
"""

import os
import sys

# None in sys.modules is Python's own "this module cannot be imported" (the import system checks it
# before any finder), so libraries that probe for an optional package see it missing too.
for _name in filter(None, os.environ.get("HARNESS_BLOCK_IMPORTS", "").split(",")):
    sys.modules[_name.strip()] = None
