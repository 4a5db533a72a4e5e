"""`harness card`: a Hugging Face model card (README.md: YAML metadata with `model-index`, then prose)
beside each model a run saved, built with huggingface_hub's ModelCard, ModelCardData and EvalResult.

The metadata names the kind's Hub task (pipeline_tag), the data set only where it is a Hub id, and the
seed's dev metrics as results.json holds them (fractions; SQuAD's in percent, as the official script
gives them) to 4 significant digits. The prose (harness/publish/card_text.py) adds the labels, how to use
the model, and what only this harness knows: the run's seeds and the interval over them, the FLOPs of
pre-training and fine-tuning, the recipe departures, the base model and its revision.
"""

from __future__ import annotations

import re
from pathlib import Path

from foundation.infra import atomic
from foundation.models.hub import parse_hub_id
from foundation.models.identity import model_identity
from foundation.models.resolve import published_checkpoint
from harness.publish.card_task import CardTask, card_task
from harness.publish.card_text import body
from harness.publish.saved import SavedModel, read_run, saved_models
from reports import results_schema
from reports.leaderboard import short_name

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


def model_card(results: results_schema.ResultsBody, saved: SavedModel, repo: str | None = None):
    """The card of one saved model (`repo`: the Hub repository it goes to, for the usage snippet), its
    metadata checked by huggingface_hub as it is built."""
    from huggingface_hub import ModelCard, ModelCardData

    base_id, revision = base_model(results["model"])
    task = card_task(results, saved)
    evals = eval_results(saved, results, task)
    data = ModelCardData(
        model_name=f"{_slug(_model_short(results))}-{saved.task}-seed{saved.seed}", language="en",
        library_name="transformers", pipeline_tag=task.pipeline_tag, base_model=base_id,
        license=results["model"].get("license"),
        datasets=[task.dataset[0]] if task.dataset else None,
        metrics=list(dict.fromkeys(e.metric_type for e in evals)),
        tags=[SOURCE, results["model"].get("family") or "encoder", saved.task], eval_results=evals)
    text = body(results, saved, task, _model_short(results), base_id, revision, repo)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text}")  # parses the YAML: model-index must round-trip


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
    published = published_checkpoint(name)  # pinned, whether from the Hub's cache or its package
    pinned = published.revision if published is not None else None
    return found[0], found[1] or (commit.group(1) if commit else pinned)


def eval_results(saved: SavedModel, results: results_schema.ResultsBody,
                 task: CardTask | None = None) -> list:
    """One EvalResult per dev split and metric of the seed's record (its `score` repeats one of them), to 4
    significant digits; your own data is named by its task (its files are described in the text)."""
    from huggingface_hub import EvalResult

    task = task or card_task(results, saved)
    dataset, config = task.dataset or (task.name, None)
    found = []
    for split, values in saved.record["metrics"].items():
        for metric, value in values.items():
            if metric == "score":
                continue
            found.append(EvalResult(
                task_type=task.pipeline_tag, task_name=task.task_title, dataset_type=dataset,
                dataset_name=task.title, dataset_config=config, dataset_split=split,
                metric_type=METRIC_IDS.get(metric, metric), metric_name=f"{metric} ({split})",
                metric_value=rounded(value)))
    return found


def rounded(value: float) -> float:
    """A score to 4 significant digits (0.38333333333333336 -> 0.3833), as the card's tables show it."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def _model_short(results: results_schema.ResultsBody) -> str:
    """The model as the leaderboard names it (a preset, a Hub id, random-init, a folder's name)."""
    return short_name(results["model"]) or "model"


def _slug(name: str) -> str:
    """A model-index name: 'google/electra-small-discriminator@v1' -> 'electra-small-discriminator'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.rsplit("/", 1)[-1].partition("@")[0]).strip("-") or "model"
