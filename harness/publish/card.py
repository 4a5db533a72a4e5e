"""`harness card`: a Hugging Face model card (README.md: YAML metadata with `model-index`, then prose)
beside each model a run saved, built with huggingface_hub's ModelCard, ModelCardData and EvalResult.

The metadata states the seed's dev metrics exactly as results.json holds them (fractions; SQuAD's in
percent, as the official script gives them), so the Hub's widgets and `metadata_load` read the same
numbers the harness does. The prose adds what only this harness knows: the run's seeds and the
interval over them, the FLOPs of pre-training and fine-tuning, the recipe departures, the base model
and its revision.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from foundation.infra import atomic
from foundation.models import flops
from foundation.models.hub import parse_hub_id
from foundation.models.identity import model_identity
from foundation.models.shapes import shape_of
from harness.publish.saved import SavedModel, read_run, saved_models
from reports import accounting, results_schema
from reports.leaderboard import departures_of, short_name
from tasks.registry import GLUE_TASKS, SQUAD_TASKS

CARD = "README.md"
SOURCE = "electra-harness"
# Our metric names -> the Hub's metric ids (hf.co/metrics), where they differ.
METRIC_IDS = {"mcc": "matthews_correlation", "spearman": "spearmanr", "pearson": "pearsonr"}
SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(/|$)")  # a Hub cache folder names its commit


def write_cards(run_dir: Path) -> list[Path]:
    """README.md in every saved model folder of `run_dir`, each written whole or not at all."""
    results = read_run(run_dir)
    written = []
    for saved in saved_models(run_dir, results):
        path = saved.folder / CARD
        atomic.write_text(path, str(model_card(results, saved)))
        written.append(path)
    return written


def model_card(results: results_schema.ResultsBody, saved: SavedModel):
    """The card of one saved model, its metadata checked by huggingface_hub as it is built."""
    from huggingface_hub import ModelCard, ModelCardData

    base_id, revision = base_model(results["model"])
    evals = eval_results(saved, results)
    data = ModelCardData(
        model_name=f"{_slug(_model_short(results))}-{saved.task}-seed{saved.seed}", language="en",
        library_name="transformers", pipeline_tag=_pipeline(saved.task),
        base_model=base_id, datasets=[_dataset(saved.task, results)[0]],
        metrics=list(dict.fromkeys(e.metric_type for e in evals)),
        tags=[SOURCE, results["model"].get("family") or "encoder", saved.task], eval_results=evals)
    text = f"---\n{data.to_yaml()}\n---\n\n{body(results, saved, base_id, revision)}"
    return ModelCard(text)  # parses the YAML back: model-index must round-trip


def base_model(model: results_schema.ModelBlock) -> tuple[str | None, str | None]:
    """(Hub id, revision) of the checkpoint fine-tuned; (None, None) for a local folder."""
    name, path = model.get("name", ""), model.get("path", "")
    if Path(name).expanduser().is_dir():
        return None, None
    identity = model_identity(name, path)
    found = parse_hub_id(identity)
    if found is None:  # a registry name without a Hub id, or a path
        return None, None
    commit = SNAPSHOT.search(path)
    return found[0], found[1] or (commit.group(1) if commit else None)


def eval_results(saved: SavedModel, results: results_schema.ResultsBody | None = None) -> list:
    """One EvalResult per dev split and metric of the seed's record (its `score` repeats one of them)."""
    from huggingface_hub import EvalResult

    dataset, dataset_name, config = _dataset(saved.task, results)
    found = []
    for split, values in saved.record["metrics"].items():
        for metric, value in values.items():
            if metric == "score":
                continue
            found.append(EvalResult(
                task_type=_pipeline(saved.task), task_name=_task_title(saved.task, results),
                dataset_type=dataset, dataset_name=dataset_name, dataset_config=config, dataset_split=split,
                metric_type=METRIC_IDS.get(metric, metric), metric_name=f"{metric} ({split})",
                metric_value=value))
    return found


def _pipeline(task: str) -> str:
    return "question-answering" if task in _squad_names() else "text-classification"


def _squad_names() -> dict[str, str]:
    return {t.name: t.version for t in SQUAD_TASKS.values()}


def _own(results: results_schema.ResultsBody | None) -> dict | None:
    """A `harness run text` result's data block (your own data), else None."""
    data = (results or {}).get("data")
    return data if isinstance(data, dict) and isinstance(data.get("task"), dict) else None


def _dataset(task: str, results: results_schema.ResultsBody | None = None) -> tuple[str, str, str | None]:
    """(Hub dataset id, pretty name, config) of a task's dev data; your own files by name and sha256."""
    own = _own(results)
    if own is not None:
        described = own.get("description") or {}
        sha = ((own.get("files") or {}).get("train") or {}).get("sha256", "")[:12]
        return (described.get("dataset") or task, f"{task} (own data, train sha256 {sha})",
                described.get("dataset_config") or None)
    if task in _squad_names():
        return f"rajpurkar/{task}", f"SQuAD {_squad_names()[task]}", None
    return "nyu-mll/glue", f"GLUE {GLUE_TASKS[task].dir_name}", task


def _task_title(task: str, results: results_schema.ResultsBody | None = None) -> str:
    own = _own(results)
    if own is not None:
        return {"regression": "Text regression", "multilabel": "Multi-label text classification"}.get(
            own["task"].get("kind"), "Text classification")
    if task in _squad_names():
        return "Extractive question answering"
    return "Text regression" if GLUE_TASKS[task].is_regression else "Text classification"


def _model_short(results: results_schema.ResultsBody) -> str:
    """The model as the leaderboard names it (a preset, a Hub id, random-init, a folder's name)."""
    return short_name(results["model"]) or "model"


def _slug(name: str) -> str:
    """A model-index name: 'google/electra-small-discriminator@v1' -> 'electra-small-discriminator'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.rsplit("/", 1)[-1].partition("@")[0]).strip("-") or "model"


def body(results: results_schema.ResultsBody, saved: SavedModel, base_id: str | None,
         revision: str | None) -> str:
    """The card's Markdown: this seed's scores, the run's seeds and interval, costs, recipe, provenance."""
    model = results["model"]
    title = _model_short(results)
    lines = [f"# {title} fine-tuned on {_dataset(saved.task, results)[1]} (seed {saved.seed})", "",
             f"An encoder of the {model.get('family') or '?'} family fine-tuned by electra-harness's "
             f"`harness run`, one of {results.get('seeds', '?')} seeds of its run. "
             "Dev scores are fractions (SQuAD: percent), as in the run's results.json.", ""]
    lines += _this_seed(saved) + _over_seeds(results, saved) + _costs(results, saved)
    lines += _recipe(results, saved) + _provenance(results, base_id, revision)
    return "\n".join(lines) + "\n"


def _this_seed(saved: SavedModel) -> list[str]:
    rows = [f"| {split} | {metric} | {value!r} |" for split, values in saved.record["metrics"].items()
            for metric, value in values.items() if metric != "score"]
    return ["## Dev results of this model", "", "| split | metric | value |", "|---|---|---|", *rows,
            "", f"Trained {saved.record.get('num_train_steps', '?')} steps on "
            f"{saved.record.get('num_train_examples', '?')} training examples.", ""]


def _over_seeds(results: results_schema.ResultsBody, saved: SavedModel) -> list[str]:
    summary = results["summary"].get(saved.task, {})
    seeds = results_schema.seeds_of(results, saved.task)
    lines = ["## Over the run's seeds", "",
             f"Seeds {', '.join(map(str, seeds))}: this model is seed {saved.seed}. The paper reports the "
             "median over seeds; the 95% interval is of the mean over seeds.", "",
             "| metric | median | mean | std | best | seeds | 95% interval | covers |",
             "|---|---|---|---|---|---|---|---|"]
    for label, stats in summary.items():
        if isinstance(stats, dict):
            cells = [label, *(repr(stats.get(k)) for k in ("median", "mean", "std", "best")),
                     str(stats.get("n")), _interval(stats), stats.get("ci_covers", "-")]
            lines.append(f"| {' | '.join(cells)} |")
    glue = results.get("glue") or {}
    if "score" in glue:
        interval = f", 95% interval {_interval(glue)}" if "ci_low" in glue else ""
        lines += ["", f"The run's GLUE score ({glue.get('convention')}) over "
                      f"{', '.join(glue.get('tasks', []))}: {glue['score']!r}{interval}."]
    return [*lines, ""]


def _interval(stats: dict) -> str:
    return f"[{stats['ci_low']!r}, {stats['ci_high']!r}]" if "ci_low" in stats else "-"


def _costs(results: results_schema.ResultsBody, saved: SavedModel) -> list[str]:
    costs = results["flops"]
    config = saved.record["resolved_config"]
    shape = shape_of(json.loads((saved.folder / "config.json").read_text()))
    this_seed = flops.finetune_flops(shape, accounting.examples_trained(saved.record), config["max_length"])
    pretrain = costs.get("pretrain_flops")
    examples = accounting.examples_trained(saved.record)
    rows = [("pre-training", "unknown" if pretrain is None else repr(pretrain),
             costs.get("pretrain_flops_basis")),
            ("fine-tuning this seed", repr(this_seed),
             f"{examples} examples padded to {config['max_length']} tokens"),
            (f"fine-tuning {saved.task}, all seeds", repr(costs["finetune_flops"].get(saved.task)),
             "results.json"),
            ("inference, one example", repr(costs.get("inference_flops")),
             f"{costs.get('inference_seq_len')} tokens")]
    lines = ["## Cost (FLOPs, ELECTRA paper convention)", "", "| what | FLOPs | basis |", "|---|---|---|",
             *(f"| {what} | {value} | {basis or ''} |" for what, value, basis in rows), "",
             f"Encoder parameters: {costs.get('num_params')}. Convention: {costs.get('convention')}."]
    if costs.get("pretrain_corpus"):
        lines.append(f"Pre-trained on: {costs['pretrain_corpus']}.")
    return [*lines, ""]


def _recipe(results: results_schema.ResultsBody, saved: SavedModel) -> list[str]:
    departs = departures_of(results)
    said = (f"Departs from ELECTRA's fine-tuning recipe: {departs}; not comparable with the paper's figures."
            if departs else "ELECTRA's fine-tuning recipe, no departures.")
    settings = json.dumps(saved.record["resolved_config"], indent=2, sort_keys=True)
    return ["## Recipe", "", said, "", "<details><summary>Every setting of this seed</summary>", "",
            "```json", settings, "```", "", "</details>", ""]


def _provenance(results: results_schema.ResultsBody, base_id: str | None, revision: str | None) -> list[str]:
    model = results["model"]
    if base_id:
        base = f"[{base_id}](https://huggingface.co/{base_id})" + (f" at revision `{revision}`" if revision
                                                                    else " (revision not pinned)")
    else:
        base = f"a local checkpoint, `{model.get('name')}` (not on the Hub)"
    versions = ", ".join(f"{k} {v}" for k, v in (results.get("versions") or {}).items())
    return ["## Provenance", "", f"- Base model: {base}; family {model.get('family', '?')}, recipe row "
            f"{model.get('recipe', '?')}.",
            f"- Trained on {results.get('accelerator', '?')} ({results.get('device', '?')}), precision "
            f"{results.get('precision', '?')}; {versions}.",
            f"- Results format {results.get('format')}."]
