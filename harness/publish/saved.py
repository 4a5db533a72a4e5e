"""The models a run saved (RUN/models/<task>-seed<N>/, save_models=true), each with its results.json
record: what `harness card` and `harness push` start from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from foundation.infra.errors import UserError
from harness.kinds import KINDS
from reports import results_schema

MODELS_DIR = "models"
FOLDER = re.compile(r"(?P<task>[a-z0-9_]+)-seed(?P<seed>\d+)$")


@dataclass(frozen=True)
class SavedModel:
    """One fine-tuned checkpoint of a run and the record of the seed that made it."""

    task: str
    seed: int
    folder: Path
    record: results_schema.SeedRecord


def read_run(run_dir: Path) -> results_schema.ResultsBody:
    """A finished run's results.json; one line naming the folder and the fix otherwise."""
    results = results_schema.read(run_dir / results_schema.FILE)
    if results is None:
        raise UserError(f"{str(run_dir)!r} has no {results_schema.FILE}; pass the --output-dir of a "
                        f"`harness run {'|'.join(KINDS)}`")
    if not isinstance(results.get("summary"), dict) or not results.get("flops"):
        raise UserError(f"{str(run_dir / results_schema.FILE)!r} has no summary or FLOPs (an unfinished "
                        "run); finish it by running the same `harness run` command again")
    return results


def saved_models(run_dir: Path, results: results_schema.ResultsBody) -> list[SavedModel]:
    """Every saved model that has its seed's record, in task then seed order; one line when there is none."""
    records = {(r["task"], r["seed"]): r for r in results["runs"]}
    found, orphans = [], []
    folders = sorted((run_dir / MODELS_DIR).glob("*-seed*")) if (run_dir / MODELS_DIR).is_dir() else []
    for folder in folders:
        match = FOLDER.match(folder.name)
        if match is None or not (folder / "config.json").is_file():
            continue
        key = (match["task"], int(match["seed"]))
        if key in records:
            found.append(SavedModel(key[0], key[1], folder, records[key]))
        else:  # saved, then killed before results.json recorded the seed: no numbers to state
            orphans.append(folder.name)
    if orphans:
        print(f"skipped {', '.join(orphans)}: no record in results.json (a seed stopped after saving); "
              "resume the run to record it")
    if not found:
        raise UserError(_why_none(run_dir, results))
    return sorted(found, key=lambda m: (results["tasks"].index(m.task) if m.task in results["tasks"] else 99,
                                        m.seed))


def _why_none(run_dir: Path, results: results_schema.ResultsBody) -> str:
    """Why a finished run left no model to publish, and what to do: one line."""
    if results.get("evaluated"):  # harness eval scores a checkpoint as it is and saves no copy of it
        model = str(results["model"].get("path") or results["model"].get("name"))
        made_by = Path(model).parent.parent if FOLDER.match(Path(model).name) else None
        where = (f"`harness card {made_by}`, the run that saved it" if made_by is not None
                 and (made_by / results_schema.FILE).is_file() else "`harness card` on the run that saved it")
        return f"{str(run_dir)!r} is a `harness eval` run: it scored {model} and saves no model; run {where}"
    if results.get("config", {}).get("save_models") is False:
        reason = ("it ran with save_models=false; fine-tune again with save_models=true into a new "
                  "--output-dir")
    else:
        reason = f"its {MODELS_DIR}/ folder is gone; pass the folder that holds it, or fine-tune again"
    return (f"{str(run_dir)!r} has no saved model ({MODELS_DIR}/<task>-seed<N>/ with a record in "
            f"results.json): {reason}")


def choose(models: list[SavedModel], task: str | None, seed: int | None) -> SavedModel:
    """One saved model: the task's (named when the run saved several), its best dev seed unless `seed`."""
    tasks = list(dict.fromkeys(m.task for m in models))
    if task is None and len(tasks) > 1:
        raise UserError(f"the run saved models of {', '.join(tasks)}; pass --task with one of them")
    task = task or tasks[0]
    mine = [m for m in models if m.task == task]
    if not mine:
        raise UserError(f"the run saved no {task!r} model; pass --task with one of {', '.join(tasks)}")
    if seed is None:
        return max(mine, key=lambda m: m.record["score"])  # the best dev score; ties go to the first seed
    chosen = next((m for m in mine if m.seed == seed), None)
    if chosen is None:
        raise UserError(f"the run saved no {task} seed {seed}; choose one of "
                        f"{', '.join(str(m.seed) for m in mine)}")
    return chosen


def add_run_parser(subparsers, name: str, help: str, description: str):
    """The subparser of a command that publishes a run's saved models (card, push): its RUN_DIR argument."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.add_argument("run", type=Path, metavar="RUN_DIR", help=(
        f"output directory of a `harness run` of any kind ({', '.join(KINDS)}) that saved its models"))
    return parser
