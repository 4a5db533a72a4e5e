"""`harness demo`'s published-encoder act: a real pre-trained checkpoint fine-tuned beside the demo's own.

The plan's published encoder (a registry name such as minilm-l6, a Hub id or a folder) is fine-tuned with
ELECTRA's recipe through `harness run glue`'s runner on the plan's published tasks, into
OUT/glue/NAME, an ordinary run folder resumed like the arms'. Then one table holds the three measured
models (its tasks beside theirs), `harness compare` pairs it with the pre-trained arm on their common
tasks, and the leaderboard report is rewritten with all three rows.
"""

from __future__ import annotations

from pathlib import Path

from harness import kinds
from harness.finetuning.kind_runner import Job
from tasks.registry import GLUE_TASKS, parse_tasks


def run_name(model: str) -> str:
    """The run folder's name: a registry name as it is, a Hub id's or a folder's last part."""
    return Path(model.split("@")[0].rstrip("/")).name


def finetune(plan, output_dir: Path, data_dir: str, tracking_uri: str | None) -> Path:
    """The published encoder fine-tuned on the plan's published tasks (finished seeds kept); its folder."""
    folder = output_dir / "glue" / run_name(plan.published)
    description = kinds.load(kinds.KINDS["glue"].description)(tasks=plan.published_tasks, data_dir=data_dir)
    job = Job(model=plan.published, description=description, settings=(plan.published_finetune(),),
              output_dir=folder, seeds=plan.seeds, tracking_uri=tracking_uri, leaderboard=False)
    kinds.load(kinds.KINDS["glue"].runner).run(job)
    return folder


def models_table(runs: dict[str, Path]) -> str:
    """Dev score x100 per task (mean over seeds [95% interval], the paper's metric) of each named run, the
    union of their tasks in GLUE's order; a task a run did not train on is blank."""
    import json

    results = {name: json.loads((folder / "results.json").read_text()) for name, folder in runs.items()}
    tasks = [t for t in GLUE_TASKS if any(t in r["summary"] for r in results.values())]
    header = ["model", *(f"{GLUE_TASKS[t].dir_name} ({GLUE_TASKS[t].paper_metric})" for t in tasks),
              "training examples", "seeds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, found in results.items():
        cells = [name]
        for task in tasks:
            figure = found["summary"].get(task, {}).get(GLUE_TASKS[task].paper_metric)
            cells.append("" if figure is None else _interval(figure))
        examples = sorted({r["num_train_examples"] for r in found["runs"]})
        cells += [", ".join(f"{n:,}" for n in examples), str(len({r["seed"] for r in found["runs"]}))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _interval(figure: dict) -> str:
    return f"{100 * figure['mean']:.1f} [{100 * figure['ci_low']:.1f}, {100 * figure['ci_high']:.1f}]"


def compare_on_common(a: Path, b: Path) -> str:
    """harness compare's table of A against B on the tasks both trained (all of A's where B has them)."""
    from harness.experiments.comparison import compare, load_results_folder, table

    first, second = load_results_folder(a), load_results_folder(b)
    common = [t for t in first.outputs if t in second.outputs]
    if not common:
        return f"(no task in common between {a.name} and {b.name})"
    return table(compare(first, second, common))


def published_tasks(plan) -> list[str]:
    return [t.name for t in parse_tasks(plan.published_tasks)]
