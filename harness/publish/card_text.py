"""A model card's Markdown: this seed's scores, the run's seeds and interval, the task and its labels, how
to use the model, costs, recipe and provenance. Scores are shown to 4 significant digits and FLOPs in
scientific notation; results.json keeps every digit."""

from __future__ import annotations

import json

from foundation.models import flops
from foundation.models.shapes import shape_of
from harness.publish.card_task import CardTask
from harness.publish.card_usage import usage
from harness.publish.saved import SavedModel
from reports import accounting, results_schema
from reports.leaderboard import departures_of


def score(value) -> str:
    """A score as the card shows it: 4 significant digits ('0.3833', '88.12'); '-' where there is none."""
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def flops_text(value) -> str:
    """FLOPs as the card shows them: '2.54e+11'; 'unknown' where there are none."""
    return "unknown" if value is None else f"{float(value):.2e}"


def body(results: results_schema.ResultsBody, saved: SavedModel, task: CardTask, model_title: str,
         base_id: str | None, revision: str | None, repo: str | None = None) -> str:
    """The card's Markdown."""
    model = results["model"]
    scale = "percent" if task.problem == "question_answering" else "fractions"
    seeds = results.get("seeds", "?")
    lines = [f"# {model_title} fine-tuned on {task.title} (seed {saved.seed})", "",
             f"An encoder of the {model.get('family') or '?'} family fine-tuned for "
             f"{task.task_title.lower()} (the Hub's task `{task.pipeline_tag}`) by electra-harness's "
             f"`harness run`: seed {saved.seed} of the run's {seeds} seed{'' if seeds == 1 else 's'}. Dev "
             f"scores are {scale}, shown to 4 significant digits (results.json keeps every digit).", ""]
    lines += _task(task, results) + usage(task, saved, repo) + _this_seed(saved) + _over_seeds(results, saved)
    lines += _costs(results, saved) + _recipe(results, saved) + _provenance(results, base_id, revision)
    return "\n".join(lines) + "\n"


def _task(task: CardTask, results: results_schema.ResultsBody) -> list[str]:
    if task.dataset is not None:
        config = f" (config `{task.dataset[1]}`)" if task.dataset[1] else ""
        data = [f"Data: the Hub data set [{task.dataset[0]}](https://huggingface.co/datasets/{task.dataset[0]})"
                f"{config}."]
    else:
        data = [f"Data: your own files (not a Hub data set), task `{task.name}`:", "",
                *(f"- {line}" for line in task.own_files)]
    return ["## Task and labels", "", *data, "", *_labels_said(task, results), ""]


def _labels_said(task: CardTask, results: results_schema.ResultsBody) -> list[str]:
    """What the model answers with: its labels (id2label), tags and their scheme, or one score."""
    described = (results.get("data") or {}).get("task") or {}
    if task.problem == "tagging":
        return [f"Tags (config.json's id2label, id order): {', '.join(task.labels)}. The model tags in "
                f"BIOES, each word's first sub-token, for the types {', '.join(described.get('types', []))}; "
                f"the training files were in {described.get('scheme', '?')}, which `harness predict` answers "
                "in."]
    if task.labels:
        kind = ("each scored on its own (sigmoid)" if task.problem == "multilabel"
                else "one per text (softmax)")
        return [f"Labels (config.json's id2label, id order), {kind}: {', '.join(task.labels)}."]
    if task.problem == "regression":
        column = described.get("label_column")
        return ["One score per text (regression)" + (f", the label column `{column}`." if column else ".")]
    return ["Answers: a span of the context (or none, SQuAD 2.0), with its score."]


def _this_seed(saved: SavedModel) -> list[str]:
    rows = [f"| {split} | {metric} | {score(value)} |" for split, values in saved.record["metrics"].items()
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
            cells = [label, *(score(stats.get(k)) for k in ("median", "mean", "std", "best")),
                     str(stats.get("n")), _interval(stats), stats.get("ci_covers", "-")]
            lines.append(f"| {' | '.join(cells)} |")
    glue = results.get("glue") or {}
    if "score" in glue:
        interval = f", 95% interval {_interval(glue)}" if "ci_low" in glue else ""
        lines += ["", f"The run's GLUE score ({glue.get('convention')}) over "
                      f"{', '.join(glue.get('tasks', []))}: {score(glue['score'])}{interval}."]
    return [*lines, ""]


def _interval(stats: dict) -> str:
    return f"[{score(stats['ci_low'])}, {score(stats['ci_high'])}]" if "ci_low" in stats else "-"


def _costs(results: results_schema.ResultsBody, saved: SavedModel) -> list[str]:
    costs = results["flops"]
    config = saved.record["resolved_config"]
    shape = shape_of(json.loads((saved.folder / "config.json").read_text()))
    examples = accounting.examples_trained(saved.record)
    this_seed = flops.finetune_flops(shape, examples, config["max_length"])
    rows = [("pre-training", flops_text(costs.get("pretrain_flops")), costs.get("pretrain_flops_basis")),
            ("fine-tuning this seed", flops_text(this_seed),
             f"{examples} examples padded to {config['max_length']} tokens"),
            (f"fine-tuning {saved.task}, all seeds", flops_text(costs["finetune_flops"].get(saved.task)),
             "results.json"),
            ("inference, one example", flops_text(costs.get("inference_flops")),
             f"{costs.get('inference_seq_len')} tokens")]
    params = costs.get("num_params")
    lines = ["## Cost (FLOPs, ELECTRA paper convention)", "", "| what | FLOPs | basis |", "|---|---|---|",
             *(f"| {what} | {value} | {basis or ''} |" for what, value, basis in rows), "",
             f"Encoder parameters: {f'{params:,}' if isinstance(params, int) else params}. "
             f"Convention: {costs.get('convention')}."]
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
    origin = [f"- Its files came from: {model['source']}; licence {model.get('license') or 'not stated'}."
              ] if model.get("source") else []
    return ["## Provenance", "", f"- Base model: {base}; family {model.get('family', '?')}, recipe row "
            f"{model.get('recipe', '?')}.", *origin,
            f"- Trained on {results.get('accelerator', '?')} ({results.get('device', '?')}), precision "
            f"{results.get('precision', '?')}; {versions}.",
            f"- Results format {results.get('format')}."]
