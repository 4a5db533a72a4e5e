"""`harness search` as a test worker whose first trial waits until another worker has one running.

Without this rendezvous a worker that starts late (imports take 10-20 s on a loaded CI machine) can
find all the study's trials already run by the other, and the test of sharing one study proves
nothing. Usage: python -m tests.search_worker <harness search arguments>.
"""

import sys
import time

import optuna

from harness.cli import main
from harness.search import trials

RENDEZVOUS_TIMEOUT_S = 300
_train_trial = trials._train_trial
_waited = False


def _after_rendezvous(trial: optuna.Trial, *args, **kwargs):
    global _waited
    if not _waited:
        _waited = True
        started = time.monotonic()
        running = optuna.trial.TrialState.RUNNING
        while len(trial.study.get_trials(deepcopy=False, states=(running,))) < 2:
            if time.monotonic() - started > RENDEZVOUS_TIMEOUT_S:
                raise TimeoutError(f"no other worker started a trial in {RENDEZVOUS_TIMEOUT_S} s")
            time.sleep(0.2)
    return _train_trial(trial, *args, **kwargs)


if __name__ == "__main__":
    trials._train_trial = _after_rendezvous
    sys.exit(main(sys.argv[1:]))
