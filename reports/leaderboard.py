"""Leaderboard rows: one per discriminator and recipe (and per task, on your own data), from results files
(measured) or the literature (published).

Scores are x100 and use the metric the ELECTRA paper reports per task, median over seeds, so our
rows line up with the published ones. A measured row may gather tasks from several results files
of the same model and recipe; its GLUE score is the mean of the tasks it has, and `glue_tasks` says
how many. A run that departs from ELECTRA's fine-tuning recipe (reports/recipe.py) gets a row of its
own, named by its departures, so a quick look never replaces or mixes with a full-recipe score. A run on
your own data (reports/own_task.py) is a row of its model, task and training data, with its headline metric,
the other metrics and their seeds; an evaluated checkpoint's row is marked so and never merges with a
fine-tuned one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models.hub import parse_hub_id
from foundation.models.identity import model_identity
from foundation.models.presets import PRESETS, size_of
from reports import accounting, recipe, results_schema
from reports.own_task import OWN_PREFIX, own_task, own_task_values
from reports.published import GLUE_COLUMNS, SQUAD_COLUMNS, published_entries
from tasks import metrics
from tasks.registry import GLUE_TASKS, SQUAD_TASKS

MEASURED, PUBLISHED = "measured", "published"
FINE_TUNED, EVALUATED = "fine-tuned", "evaluated"  # a measured row's stage
ALL_GLUE = "GLUE (all 8)"
SQUAD_VERSIONS = {task.name: task.version for task in SQUAD_TASKS.values()}  # squad_v2 -> 2.0
GLUE_CI = ("glue_score_ci_low", "glue_score_ci_high")
# 95% intervals (reports/stats.py) beside the medians: per task, then the GLUE average's.
CI_COLUMNS = tuple(f"{column}_ci_{end}" for column in (*GLUE_COLUMNS, *SQUAD_COLUMNS)
                   for end in ("low", "high"))
VALUE_COLUMNS = ("num_params", "pretrain_flops", "inference_flops", *GLUE_COLUMNS, "glue_score", "glue_tasks",
                 *SQUAD_COLUMNS, *GLUE_CI, *CI_COLUMNS)
SEEDS = "seeds"  # a measured row's value: the fewest fine-tuning seeds any of its scores is over
SCORED = (*GLUE_COLUMNS, *SQUAD_COLUMNS)
RESULTS_FORMAT = re.compile(r"electra-harness/([a-z0-9]+)-results/(\d+)$")
RESULTS_VERSION = "1"
FULL_RECIPE, AS_PUBLISHED = "electra", "as published"  # the recipe column of rows without departures
DEPARTS = "departs: "  # before a row's departures, in its recipe column and marked name (read back by tag)
MAX_REFERENCES = 20  # results files listed per measured row, newest kept
NO_FLOPS = ("{path} has no FLOPs metadata (written before FLOPs accounting); re-run the same "
            "`harness run` command with its --output-dir to add it")


@dataclass(frozen=True)
class Row:
    """One leaderboard row; `values` holds only what is known (a missing key is a gap)."""

    key: str  # stable identity: hub id or resolved path (measured), model @ citation (published)
    model: str
    source: str  # MEASURED or PUBLISHED
    reference: str  # results files, one a line (measured) or the citation (published)
    values: dict[str, float] = field(default_factory=dict)
    notes: str = ""
    departures: str = ""  # measured: the settings that left ELECTRA's recipe ("" = none), recipe.describe
    family: str = ""  # measured: the encoder family (the config's model_type) as results.json records it
    corpus: str = ""  # measured: what the model was pre-trained on (pretrain_meta.json's corpus summary)
    # measured: the model in a few words (a preset, a Hub id, random-init, a folder's name), not its path
    short_name: str = ""
    stage: str = ""  # measured: FINE_TUNED, or EVALUATED for a checkpoint scored without training
    # measured on your own data: its column (own.NAME.SHA8, reports/own_task.py), headline metric, problem
    task: str = ""
    headline: str = ""
    problem: str = ""
    # measured: where the checkpoint's files came from (results.json's model source: a package, the Hub's
    # cache, a local folder) and its licence, where results.json says
    origin: str = ""
    license: str = ""

    @property
    def name(self) -> str:
        """The model as a row's name starts: short, so that the UI's narrow name column tells rows apart."""
        return self.short_name or self.model

    @property
    def task_set(self) -> str:
        """What the row was scored on, the same text for rows that can be compared: 'sst2,stsb,rte' (the
        paper's column order), 'GLUE (all 8)', for SQuAD-only rows 'squad20', 'squad11 + squad20', and
        your own task with its data 'intents (data e6ae98f7)'."""
        if self.task:
            name, _, digest = self.task.removeprefix(OWN_PREFIX).rpartition(".")
            return f"{name} (data {digest})"
        return task_set(self.values)

    @property
    def row_id(self) -> str:
        """What tells rows apart: the model identity, the departures of a run off the recipe, your own
        task and its data, and (only when evaluated, so older fine-tuned rows keep their identity) the
        stage."""
        marked = self._marked(self.key) + (f" on {self.task}" if self.task else "")
        return f"{marked} ({self.stage})" if self.stage == EVALUATED else marked

    @property
    def label(self) -> str:
        """The model's name as shown, marked as evaluated and with its departures:
        'electra-small (evaluated) [departs: num_epochs=1]'."""
        return self._marked(self.model + (f" ({EVALUATED})" if self.stage == EVALUATED else ""))

    @property
    def recipe(self) -> str:
        """The recipe column: electra, 'departs: ...', or as published."""
        if self.departures:
            return DEPARTS + self.departures
        return AS_PUBLISHED if self.source == PUBLISHED else FULL_RECIPE

    def _marked(self, name: str) -> str:
        return f"{name} [{self.recipe}]" if self.departures else name


def task_set(values: dict[str, float]) -> str:
    """The tasks scored in `values`, in one canonical text (see Row.task_set); "" for none. A row with
    GLUE scores is compared on them (its SQuAD figures, if any, ride along); SQuAD-only rows by version."""
    glue = [t for t in GLUE_COLUMNS if t in values]
    if len(glue) == len(GLUE_COLUMNS) or (not glue and values.get("glue_tasks") == len(GLUE_COLUMNS)):
        return ALL_GLUE  # Table 1 gives only the eight tasks' average
    if glue:
        return ",".join(glue)
    return " + ".join(f"squad{v.replace('.', '')}" for v in SQUAD_VERSIONS.values()
                      if any(c.startswith(f"squad{v.replace('.', '')}_") for c in values))


def short_name(model: dict) -> str:
    """A measured model in a few words: a registry name or Hub id as given; a `harness pretrain` output
    as its preset (and objective, when not ELECTRA's); an untrained control as random-init; else the
    folder's name."""
    name = (model.get("name") or "").rstrip("/")
    if not Path(name).expanduser().is_dir() and (name in PRESETS or parse_hub_id(name)):
        return name  # a registry name or Hub id (@revision kept)
    meta = accounting.pretrain_record(Path(model.get("path") or name))
    objective = str(meta.get("objective", "")) if meta else ""
    if objective.startswith("none"):
        return "random-init" + (f" {meta['preset']}" if meta.get("preset") else "")
    if meta and meta.get("preset"):
        return meta["preset"] + ("" if objective in ("", "electra") else f" ({objective})")
    return Path(name).name or name


def _stage(results: results_schema.ResultsBody) -> str:
    """EVALUATED for `harness eval`'s results (or where every seed record trained no step: a checkpoint only
    scored), else FINE_TUNED."""
    if results.get("evaluated") is True:
        return EVALUATED
    runs = results.get("runs") or []
    return EVALUATED if runs and all(r.get("num_train_steps") == 0 for r in runs) else FINE_TUNED


def published_rows() -> list[Row]:
    """The reference figures as rows tagged PUBLISHED."""
    return [Row(f"{entry['model']} @ {entry['reference']}", entry["model"], PUBLISHED, entry["reference"],
                entry["values"], entry["notes"]) for entry in published_entries()]


def load_results(paths: list[Path]) -> list[tuple[Path, results_schema.ResultsBody]]:
    """Read results files (or run directories holding one); all bad ones reported in one error."""
    loaded, errors = [], []
    for path in paths:
        file = path / results_schema.FILE if path.is_dir() else path
        try:
            results = results_schema.load(file)
        except FileNotFoundError:
            errors.append(f"{str(path)!r} has no results.json (is the run finished?)")
            continue
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            errors.append(f"{str(file)!r} is not a JSON results file ({type(error).__name__})")
            continue
        problem = _format_problem(results)
        if problem:
            errors.append(f"{str(file)!r} {problem}")
        else:
            loaded.append((file.resolve(), results))
    if errors:
        raise UserError("; ".join(errors))
    return loaded


def _format_problem(results) -> str | None:
    found = results.get("format") if isinstance(results, dict) else None
    match = RESULTS_FORMAT.match(found) if isinstance(found, str) else None
    if match is None:
        return (f"is not a harness results file (format {found!r}); expected electra-harness/glue-results/"
                f"{RESULTS_VERSION} as `harness run` writes")
    if match.group(2) != RESULTS_VERSION:
        return (f"has format {found!r}, another version than this harness reads "
                f"({RESULTS_VERSION}); re-run it with this version")
    if not isinstance(results.get("model"), dict) or not isinstance(results.get("summary"), dict):
        return "lacks its model or summary section (an unfinished run?); finish it with `harness run`"
    return None


def measured_row(path: Path, results: results_schema.ResultsBody) -> Row:
    """A results file as a measured row: task medians, SQuAD EM/F1, FLOPs (or a note why not)."""
    model = results["model"]
    costs = results.get("flops") or {}
    key = costs.get("model_id") or model_identity(model.get("name", ""), model.get("path", ""))
    own = own_task(results)
    # Your own task's summary is keyed by its name, which may be a GLUE task's (a task named rte)
    values = own_task_values(results, own) if own else _task_values(results["summary"])
    glue = results.get("glue") or {}
    if "ci_low" in glue and set(glue.get("tasks", ())) == {t for t in GLUE_COLUMNS if t in values}:
        values |= {"glue_score_ci_low": 100 * glue["ci_low"], "glue_score_ci_high": 100 * glue["ci_high"]}
    values |= {name: float(costs[name]) for name in ("num_params", "pretrain_flops", "inference_flops")
               if isinstance(costs.get(name), int | float)}
    if not costs:
        notes = NO_FLOPS.format(path=path)
    elif values.get("pretrain_flops") is None:
        notes = f"pre-training FLOPs {costs.get('pretrain_flops_basis') or accounting.UNKNOWN}"
    else:
        notes = ""
    departures = departures_of(results)
    return _with_glue(Row(key, model.get("name") or key, MEASURED, str(path), values, notes, departures,
                          model.get("family", ""), costs.get("pretrain_corpus") or "", short_name(model),
                          _stage(results), own.column if own else "", own.headline if own else "",
                          own.problem if own else "", model.get("source") or "", model.get("license") or ""))


def departures_of(results: results_schema.ResultsBody) -> str:
    """The settings a run changed from ELECTRA's recipe (and the search that chose them), "" for none."""
    return recipe.describe(recipe.departures(results, recipe_size(results["model"])) | _searched(results))


def _searched(results: dict) -> dict[str, str]:
    """A run whose settings a harness search chose (--params-from): which search, and of how many trials."""
    search = results.get("search")
    if not isinstance(search, dict):
        return {}
    return {"search": f"{search.get('study')} ({search.get('trials')} trials)"}


def recipe_size(model: dict) -> str | None:
    """The run's recipe row (small, base, large): as results.json records it ("electra-base"), or for files
    written before, from the checkpoint's config.json; None when it is unreadable."""
    if isinstance(model.get("recipe"), str):
        return model["recipe"].removeprefix("electra-")
    try:
        config = json.loads((Path(model.get("path")) / "config.json").read_text())
        return size_of(int(config["hidden_size"]), int(config.get("num_hidden_layers", 12)))
    except (TypeError, ValueError, KeyError, OSError):
        return None


def _task_values(summary: dict) -> dict[str, float]:
    """GLUE and SQuAD medians and intervals, and `seeds`: the fewest seeds a score is over."""
    values, seeds = {}, []
    for task_name, stats in summary.items():
        if task_name in GLUE_COLUMNS:
            task = GLUE_TASKS[task_name]
            # CoLA MCC, STS-B Spearman, MRPC/QQP accuracy; MNLI's first dev split is the matched one.
            chosen = stats.get(task.paper_label) or stats.get("score")
            if isinstance(chosen, dict) and isinstance(chosen.get("median"), int | float):
                values[task_name] = 100 * chosen["median"]
                values |= _interval(task_name, chosen, 100)
                seeds.append(chosen.get("n"))
        elif task_name in SQUAD_VERSIONS:
            # The official script's keys, already x100: EM is exact_match (1.1) or exact (2.0, at
            # the default null threshold, not the dev-tuned best_exact).
            prefix = "squad" + SQUAD_VERSIONS[task_name].replace(".", "")
            for metrics, column in ((("exact_match", "exact"), "em"), (("f1",), "f1")):
                found = [stats[m] for m in metrics if isinstance(stats.get(m), dict)]
                if found and isinstance(found[0].get("median"), int | float):
                    values[f"{prefix}_{column}"] = float(found[0]["median"])
                    values |= _interval(f"{prefix}_{column}", found[0], 1)
                    seeds.append(found[0].get("n"))
    counted = [n for n in seeds if isinstance(n, int)]
    return values | ({SEEDS: float(min(counted))} if counted else {})


def _interval(column: str, found: dict, scale: float) -> dict[str, float]:
    if not isinstance(found.get("ci_low"), int | float):
        return {}  # an older results.json: no interval
    return {f"{column}_ci_low": scale * found["ci_low"], f"{column}_ci_high": scale * found["ci_high"]}


def _with_glue(row: Row) -> Row:
    """Measured rows: GLUE score in the paper's convention (metrics.glue_average) over the tasks present."""
    tasks = {name: row.values[name] for name in GLUE_COLUMNS if name in row.values}
    values = {k: v for k, v in row.values.items() if k not in ("glue_score", "glue_tasks")}
    if tasks:
        values |= {"glue_score": metrics.glue_average(tasks), "glue_tasks": float(len(tasks))}
    return replace(row, values=values)


def merge(old: Row, new: Row) -> Row:
    """`new` over `old` for one model and recipe: newer task scores win, tasks from both are kept."""
    if new.source == PUBLISHED:
        return new
    references = list(dict.fromkeys([*old.reference.splitlines(), *new.reference.splitlines()]))
    references = references[-MAX_REFERENCES:]
    values = old.values | new.values
    new_tasks = {t for t in GLUE_COLUMNS if t in new.values}
    if SEEDS in old.values and SEEDS in new.values and not _covers(new, old):
        values[SEEDS] = min(old.values[SEEDS], new.values[SEEDS])  # the fewest seeds of any score kept
    # A GLUE interval is for one results file's tasks: keep new's only if the merged row has no others.
    if new_tasks:
        values = {k: v for k, v in values.items() if k not in GLUE_CI}
        if new_tasks == {t for t in GLUE_COLUMNS if t in values}:
            values |= {k: new.values[k] for k in GLUE_CI if k in new.values}
    notes = "" if {"pretrain_flops", "inference_flops"} <= values.keys() else (new.notes or old.notes)
    return _with_glue(Row(old.key, new.model, MEASURED, "\n".join(references), values, notes, old.departures,
                          new.family or old.family, new.corpus or old.corpus,
                          new.short_name or old.short_name, old.stage or new.stage, old.task or new.task,
                          new.headline or old.headline, new.problem or old.problem, new.origin or old.origin,
                          new.license or old.license))


def _covers(new: Row, old: Row) -> bool:
    """Whether every score of `old` is one `new` measured again."""
    return {c for c in old.values if c in SCORED} <= new.values.keys()


def merge_rows(rows: list[Row]) -> list[Row]:
    """Rows with the same row_id folded in order (later ones win)."""
    merged: dict[str, Row] = {}
    for row in rows:
        merged[row.row_id] = merge(merged[row.row_id], row) if row.row_id in merged else row
    return list(merged.values())


def rows_from_results(paths: list[Path]) -> list[Row]:
    """Measured rows, one per model and recipe, from results files in the given order."""
    return merge_rows([measured_row(path, results) for path, results in load_results(paths)])


def ranked(rows: list[Row]) -> list[Row]:
    """Best GLUE score first; rows without one last, by name (and your own task)."""
    return sorted(rows, key=lambda r: (-r.values.get("glue_score", float("-inf")), r.model, r.key, r.task))
