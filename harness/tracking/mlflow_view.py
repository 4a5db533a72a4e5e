"""How the `leaderboard` experiment presents itself in the MLflow UI: its description, and a saved view
of the runs table with the leaderboard's columns, rows that can be compared (the same task set) together.

MLflow 3.17's UI keeps saved views as experiment tags `mlflow.sharedViewState.<id>` (a JSON envelope
whose `state` is the runs table's search and column state) and opens one with
`#/experiments/<id>/runs?viewStateShareKey=<id>`. Without that parameter the UI shows the columns
each browser last chose (its local storage); no tag sets the default columns for everyone, and an
experiment opens on the GenAI "Overview" page (the `mlflow.experimentKind` tag does not change that
while the UI's GenAI/Model training switch is on GenAI), whose sidebar has no runs table.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

from foundation.infra.secrets import redact_uri

NOTE_TAG = "mlflow.note.content"
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_ID = "leaderboard"
# The UI always shows run name, created and duration, orders metric columns by name before tags, and
# on a local server opens its Assistant panel over the right third on a browser's first visit: a
# 1600-pixel window then shows four more columns, whose headers hold ~15 characters. The rest of a row
# is in each run's description. A narrow column prints 1.294e18 as 129400000..., so the view shows
# pre-training FLOPs in units of 1e18 under a name that fits; `source` is left out because `recipe`
# says it too ("as published" on the paper's rows).
# `task_set` replaces the `glue_tasks` count (two 3-task sets are not comparable) and orders the view.
# `score` is every row's headline (the GLUE score, SQuAD F1, your own task's headline metric), so rows of
# every kind show a number in one column; the run's name says which metric it is.
SCALED_FLOPS = "flops_1e18"
SCORE = "score"
TASK_SET_TAG = "task_set"
METRIC_COLUMNS = (SCORE, SCALED_FLOPS)
TAG_COLUMNS = (TASK_SET_TAG, "recipe")
# The view sorts by task set, so rows that can be compared sit together; MLflow's store breaks ties
# newest first. The UI passes a view's orderByKey to the search as it is.
ORDER_BY = f"tags.`{TASK_SET_TAG}`"
DESCRIPTION = """\
**ELECTRA harness leaderboard**: a run per model and recipe (and per task on your own data), named `model ·
TASK SET · HEADLINE SCORE (GLUE 79.9, SQuAD1.1 F1 86.8, accuracy 91.2) · fine-tuned|evaluated|published ·
pre-training FLOPs`; click a run for its whole row. Compare `score` only between rows
with the same `task_set` and `recipe`.

- Runs table in the saved view "Leaderboard" (Views menu, top right): `score` (the row's headline x100),
  `flops_1e18` (pre-training FLOPs / 1e18), `task_set`, `recipe`, sorted by `task_set` so rows that can
  be compared sit together (newest first among them; click `score` to rank);
  `#/experiments/<this id>/runs?viewStateShareKey=leaderboard` opens it.
- Only the rows of one task set: search `tags.task_set = "sst2,stsb,rte"` (the tasks in the paper's
  order; `GLUE (all 8)` for the whole benchmark; `intents (data e6ae98f7)`: your own task and the
  sha256 of its training file).

- `source`: `measured` (this harness) or `published` (paper and READMEs, not measured here).
- `stage`: `fine-tuned` (harness run), `evaluated` (a fine-tuned checkpoint scored as it is) or `published`.
- `recipe`: `electra` (ELECTRA's fine-tuning recipe), or `departs: ...`, the settings a quick or
  modified run changed; those rows are not comparable with the paper.
- Metrics: `score`, `glue_score` (x100, mean over the GLUE tasks run, paper convention), `glue_tasks`,
  per-task scores, SQuAD EM/F1, your own task's (`own.NAME.SHA8`, its headline, and `.METRIC`),
  `seeds` (the fewest seeds a score is over), `pretrain_flops`, `inference_flops`, `num_params`, 95%
  intervals.
- Filter with `tags.source = "measured"` or `tags.recipe = "electra"`.
- A measured row's `family` (the encoder's model_type), `model_source` (where its files came from: a
  package, the Hub's cache, a local folder) and `license` are tags, and in its description.
"""


def view_state() -> dict:
    """The runs table's state for the saved view: leaderboard columns, newest runs first."""
    columns = [f"metrics.`{name}`" for name in METRIC_COLUMNS] + [f"tags.`{name}`" for name in TAG_COLUMNS]
    # By task set, comparable rows together; the store orders ties newest first. Click the score header
    # to rank by score.
    return {"searchFilter": "", "orderByKey": ORDER_BY, "orderByAsc": True,
            "startTime": "ALL", "lifecycleFilter": "Active", "modelVersionFilter": "All Runs",
            "datasetsFilter": [],
            "selectedColumns": columns, "runsExpanded": {}, "runsPinned": [], "runsHidden": [],
            "runsHiddenMode": "SHOW_ALL", "runListHidden": False, "viewMaximized": False}


def experiment_tags(created_ms: int) -> dict[str, str]:
    """The experiment's description and saved view, as tags."""
    envelope = {"name": "Leaderboard", "createdAt": created_ms, "updatedAt": created_ms,
                "state": json.dumps(view_state())}
    return {NOTE_TAG: DESCRIPTION, VIEW_TAG_PREFIX + VIEW_ID: json.dumps(envelope)}


def describe_experiment(client, experiment) -> None:
    """Set the tags that differ from what the experiment has (the view's timestamps aside)."""
    wanted = experiment_tags(int(time.time() * 1000))
    for key, value in wanted.items():
        if _comparable(key, experiment.tags.get(key)) != _comparable(key, value):
            client.set_experiment_tag(experiment.experiment_id, key, value)


def _comparable(key: str, value: str | None):
    if value is None or not key.startswith(VIEW_TAG_PREFIX):
        return value
    try:
        return json.loads(value).get("state")
    except (ValueError, AttributeError):
        return value


def runs_url(base_url: str, experiment_id: str) -> str:
    """The runs table of the experiment in the saved view (not the GenAI overview MLflow 3.17 opens)."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_ID}"


def browse_hint(uri: str, experiment_id: str) -> str:
    """Where to look at the leaderboard: the link on a server, or how to serve a SQLite store; a
    password in the URI shown as ***."""
    uri = redact_uri(uri)
    if uri.startswith(("http://", "https://")):
        return runs_url(uri, experiment_id)
    return (f"{runs_url('http://127.0.0.1:5000', experiment_id)} after `MLFLOW_SERVER_ENABLE_JOB_EXECUTION="
            f"false {mlflow_command()} ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000`")


def mlflow_command() -> str:
    """`mlflow` where the shell finds this environment's; else this interpreter's `python -m mlflow`.

    After `tox -e demo` the mlflow script lives in .tox/demo/bin, not on the user's PATH.
    """
    import shlex
    import shutil
    import sys

    beside = Path(sys.executable).parent / "mlflow"
    found = shutil.which("mlflow")
    if found and beside.exists() and Path(found).resolve() == beside.resolve():
        return "mlflow"
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):
        python = python.relative_to(Path.cwd())  # .tox/demo/bin/python: short, and it runs from here
    return f"{shlex.quote(str(python))} -m mlflow"


def wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    """Wait until the `mlflow ui` that `process` runs answers on {url}/health (~5 s idle; a busy two-core
    machine can take much longer); a RuntimeError naming its exit status if it stops or times out first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                status = process.poll()
                raise RuntimeError(f"mlflow ui did not come up on {url} (exit status {status})") from None
            time.sleep(0.5)
