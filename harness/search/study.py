"""Optuna plumbing for `harness search`: storage, study, sampler, pruner, and best-parameter files.

A study lives in an Optuna RDB storage: a local SQLite file by default, or a PostgreSQL (or MySQL)
URL that several `harness search` processes on one or many machines share. Workers send heartbeats;
a trial whose worker died is failed by the next worker after `grace period = 2 x heartbeat` seconds
and queued once more with the same parameters, so a dead worker's trial does not stay RUNNING.

A worker can die while its trial is still drawing parameters: Optuna starts the heartbeat before it
calls the objective, so no order of work in the harness rules that out. The retry keeps what the dead
trial had drawn and draws the rest afresh (Optuna's retry callback copies the parameters that exist
and `suggest_*` returns those); one killed before its first draw is drawn anew. One gap is Optuna's:
a worker killed between starting a trial and its first heartbeat leaves that trial RUNNING, as Optuna
only fails trials whose heart has beaten at least once.
"""

from __future__ import annotations

import json
import random
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from foundation.infra import atomic
from foundation.infra.errors import UserError
from foundation.infra.secrets import redact_uri
from harness.search.space import DEPARTURES
from reports.results_schema import SearchOrigin
from tasks.config import FinetuneConfig

DEFAULT_STORAGE = "sqlite:///runs/optuna.db"
BEST_FORMAT = "electra-harness/best-params/2"  # /1: before trial_seeds, its params held a drawn seed
SEEDLESS = ("was made before trials measured fixed seeds: its trials drew the seed as a parameter, so "
            "its scores are each one seed's, the best likely a lucky one")
PRUNERS = ("median", "hyperband", "none")


def redact(url: str) -> str:
    """A storage URL fit for logs and files: its passwords and tokens as *** (foundation/infra/secrets.py)."""
    return redact_uri(url)


def open_storage(url: str, heartbeat_s: int | None = None,
                 on_stale: Callable[[optuna.Study, optuna.trial.FrozenTrial], None] | None = None
                 ) -> optuna.storages.RDBStorage:
    """The RDB storage at `url`; unreachable or unusable storage is a UserError.

    With `heartbeat_s`, running trials send heartbeats, and a stale one (its worker died) is failed,
    queued once more with the parameters it had drawn, then passed to `on_stale`.
    """
    if url.startswith("sqlite:///"):
        folder = Path(url.removeprefix("sqlite:///")).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"cannot create {str(folder)!r} for Optuna storage {redact(url)!r} "
                            f"({error.strerror}); pass a writable sqlite:///FILE or a server URL") from error
    for attempt in range(3):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    _with_driver(url), engine_kwargs=_engine_kwargs(url), heartbeat_interval=heartbeat_s,
                    grace_period=None if heartbeat_s is None else 2 * heartbeat_s,
                    heartbeat_stale_trial_callback=None if heartbeat_s is None else _StaleTrials(on_stale))
        except ImportError as error:  # optuna's wrapper of the driver's ModuleNotFoundError
            driver = getattr(error.__cause__, "name", None) or "its database driver"
            hint = "psycopg2-binary" if url.startswith("postgresql") else f"the package providing {driver}"
            raise UserError(f"Optuna storage {redact(url)!r} needs the Python module {driver}; "
                            f"pip install {hint}") from error
        except Exception as error:
            # Workers that start together race to create the tables: the loser retries.
            if attempt == 2 or not _is_creation_race(error):
                reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
                raise UserError(f"cannot open Optuna storage {redact(url)!r} ({redact(reason)}); check the "
                                "URL (sqlite:///FILE or postgresql://USER:PASSWORD@HOST:PORT/DB) and that "
                                "its server is up and reachable") from error
            time.sleep(0.5 + random.random())
    raise AssertionError("unreachable")


def _engine_kwargs(url: str) -> dict[str, Any]:
    if url.startswith("sqlite:"):
        return {"connect_args": {"timeout": 60}}  # concurrent workers wait for the file's lock
    if url.startswith(("postgresql", "mysql")):
        return {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}}
    return {}


def _with_driver(url: str) -> str:
    """SQLAlchemy 2.1 reads postgresql:// as psycopg 3; use psycopg2 (the test extra's) if only it is here."""
    import importlib.util

    if url.startswith("postgresql://") and importlib.util.find_spec("psycopg") is None \
            and importlib.util.find_spec("psycopg2") is not None:
        return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def _is_creation_race(error: Exception) -> bool:
    import sqlalchemy.exc

    text = str(error).lower()
    return isinstance(error, sqlalchemy.exc.IntegrityError | sqlalchemy.exc.ProgrammingError) or (
        isinstance(error, sqlalchemy.exc.OperationalError) and ("locked" in text or "already exists" in text))


class _StaleTrials:
    """Queue a dead worker's trial once more, then tell `on_stale` (which closes its MLflow run)."""

    def __init__(self, on_stale):
        self.retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        self.on_stale = on_stale

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.retry(study, trial)
        if self.on_stale is not None:
            self.on_stale(study, trial)


def open_study(storage: optuna.storages.RDBStorage, name: str, attrs: dict[str, Any],
               sampler: optuna.samplers.BaseSampler, pruner: optuna.pruners.BasePruner) -> optuna.Study:
    """Create or resume the study `name`, which must maximise and match `attrs` (task, model, space)."""
    study = optuna.create_study(storage=storage, study_name=name, sampler=sampler, pruner=pruner,
                                direction="maximize", load_if_exists=True)
    where = f"study {name!r} in {redact(storage.url)!r}"
    if study.directions != [optuna.study.StudyDirection.MAXIMIZE]:
        directions = ", ".join(d.name.lower() for d in study.directions)
        raise UserError(f"{where} exists and has direction {directions}, but harness search maximizes dev "
                        "scores; pass another --study-name")
    existing = study.user_attrs
    if "seed" in existing.get("space", {}):
        raise UserError(f"{where} {SEEDLESS}; pass another --study-name for a new study, whose trials "
                        "each train on the fixed trial_seeds")
    for key, value in attrs.items():
        if key not in existing:
            study.set_user_attr(key, value)
        elif existing[key] != value:
            raise UserError(f"{where} was created with {key} {json.dumps(existing[key])}, not "
                            f"{json.dumps(value)}; pass another --study-name or the study's own settings")
    return study


class TrialSeededTPE(optuna.samplers.TPESampler):
    """TPE whose random draws follow (seed, trial number), not the worker's history of draws.

    Workers started with the same --seed then propose different trials instead of identical ones,
    and a lone worker is still reproducible.
    """

    def __init__(self, seed: int, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self._base_seed = seed

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        seed = (self._base_seed * 1_000_003 + trial.number) % 2**32
        # TPE draws from its own RandomState and its startup RandomSampler's; both are LazyRandomState.
        self._rng.rng.seed(seed)
        self._random_sampler._rng.rng.seed(seed)
        super().before_trial(study, trial)


def make_pruner(name: str, max_epochs: int) -> optuna.pruners.BasePruner:
    """Median: stop a trial whose epoch score is below the median of finished trials at that epoch.

    Hyperband: successive halving over epochs (1 .. max_epochs, keeping a third at each rung).
    """
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(max_epochs, 1),
                                              reduction_factor=3)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise UserError(f"unknown pruner {name!r}; choose one of {', '.join(PRUNERS)}")


def count_states(study: optuna.Study) -> dict[str, int]:
    """Trials per state name (COMPLETE, PRUNED, FAIL, RUNNING, WAITING)."""
    counts = {state.name: 0 for state in optuna.trial.TrialState}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] += 1
    return counts


def pruning_savings(study: optuna.Study) -> dict[str, float]:
    """Epochs the pruner skipped, and their time at each pruned trial's own measured time per epoch."""
    epochs = seconds = 0.0
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,)):
        trained, planned = trial.user_attrs.get("epochs_run"), trial.user_attrs.get("epochs_planned")
        if trained and planned:
            epochs += planned - trained
            seconds += (planned - trained) * trial.user_attrs.get("wall_time_s", 0.0) / trained
    return {"epochs_skipped": epochs, "time_saved_s": seconds}


def best_record(study: optuna.Study, storage_url: str) -> dict[str, Any] | None:
    """What best_params.json holds: the best complete trial's parameters and how the search went.

    `trial_seeds` are the seeds behind the best trial's score, `search_seeds` every seed a trial trained
    on (a re-measure must avoid them). A study made before trial_seeds (trials drew `seed`) is read
    with its seed dropped from the parameters and a `note` saying what its score is.
    """
    completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not completed:
        return None
    best = max(completed, key=lambda trial: trial.value)
    attrs = study.user_attrs
    record = {"format": BEST_FORMAT, "study": study.study_name, "storage": redact(storage_url),
              "benchmark": attrs.get("benchmark"), "task": attrs.get("task"), "model": attrs.get("model"),
              "trial": best.number, "value": best.value,
              "params": {key: value for key, value in best.params.items() if key != "seed"},
              "trial_seeds": attrs.get("trial_seeds"), "search_seeds": attrs.get("trial_seeds"),
              "settings": attrs.get("settings", {}), "trials": count_states(study),
              "pruning": pruning_savings(study)}
    # searched departures (space.DEPARTURES) the best trial chose off ELECTRA's recipe: a run from it departs
    departs = {key: value for key, value in best.params.items()
               if key in DEPARTURES and value != getattr(FinetuneConfig(), key)}
    record |= {"departures": departs} if departs else {}
    if "seed" in best.params:
        drawn = {trial.params["seed"] for trial in study.get_trials(deepcopy=False) if "seed" in trial.params}
        record |= {"trial_seeds": [best.params["seed"]], "search_seeds": sorted(drawn),
                   "note": f"study {study.study_name!r} {SEEDLESS}; its best trial's seed "
                           f"{best.params['seed']} is dropped and its score {best.value:.4f} is that seed's"}
    return record


def write_best(path: Path, record: dict[str, Any]) -> None:
    atomic.write_json(path, record)


def params_from(source: str, kind: str = "glue") -> tuple[list[str], str, SearchOrigin]:
    """`key=value` FinetuneConfig overrides from a best_params.json, STORAGE_URL#STUDY or a study in
    runs/optuna.db: the search's fixed settings, then the best trial's parameters (never a seed); their
    origin in words; and results.json's `search` block (origin_block)."""
    record = _best_from_file(source) if Path(source).suffix == ".json" or Path(source).is_file() \
        else _best_from_study(source)
    if record.get("benchmark") != kind:  # the kind of task, as studies record it
        raise UserError(f"--params-from {redact(source)!r} holds a {record.get('benchmark')} search, not a "
                        f"{kind} one; pass a {kind} study or its best_params.json")
    seeds = record["trial_seeds"]
    named = f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"
    described = (f"{record['study']} trial {record['trial']} ({record['task']}, dev score "
                 f"{record['value']:.4f}, the mean of {named})")
    overrides = [f"{key}={value}" for key, value in (record["settings"] | record["params"]).items()]
    return overrides, described, origin_block(record)


def origin_block(record: dict[str, Any]) -> SearchOrigin:
    """results.json's `search`: the search that chose the configuration, its trials, its score there."""
    counts = record["trials"]
    block = SearchOrigin(study=record["study"], storage=record["storage"], task=record["task"],
                         trial=record["trial"], trials=counts["COMPLETE"] + counts["PRUNED"],
                         score=record["value"], trial_seeds=record["trial_seeds"],
                         search_seeds=record["search_seeds"])
    return block | ({"note": record["note"]} if "note" in record else {})


def _best_from_file(source: str) -> dict[str, Any]:
    path = Path(source)
    if not path.is_file():
        raise UserError(f"--params-from file {source!r} does not exist; pass a best_params.json "
                        "written by harness search, or STORAGE_URL#STUDY")
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UserError(f"--params-from file {source!r} is not JSON ({error})") from error
    if isinstance(record, dict) and record.get("format") == "electra-harness/best-params/1":
        raise UserError(f"--params-from file {source!r} comes from a search that {SEEDLESS}; pass its study "
                        f"as STORAGE_URL#{record.get('study')} (read with the seed dropped) or search anew")
    if not isinstance(record, dict) or record.get("format") != BEST_FORMAT:
        raise UserError(f"--params-from file {source!r} is not a best_params.json ({BEST_FORMAT}); "
                        "pass one written by harness search")
    return record


def _best_from_study(source: str) -> dict[str, Any]:
    url, _, name = source.rpartition("#") if "#" in source else (DEFAULT_STORAGE, "", source)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).expanduser().is_file():
        raise UserError(f"--params-from {redact(source)!r}: no Optuna storage file {redact(url)!r}; pass "
                        "STORAGE_URL#STUDY or a best_params.json")
    storage = open_storage(url)
    names = optuna.study.get_all_study_names(storage)
    if name not in names:
        raise UserError(f"no study {name!r} in {redact(url)!r} (studies: {', '.join(names) or 'none'}); "
                        "pass STORAGE_URL#STUDY or a best_params.json")
    record = best_record(optuna.load_study(study_name=name, storage=storage), url)
    if record is None:
        raise UserError(f"study {name!r} has no complete trial yet; let harness search finish one")
    return record
