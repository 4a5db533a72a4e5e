"""`harness demo`: pre-train, fine-tune beside a control, compare, report, export and predict."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.tracking import mlflow_runs

EPILOG = """what it runs (each stage is an ordinary harness command's code path):
  1. harness pretrain      a small ELECTRA to a fixed FLOPs budget on the shared corpus
  2. harness run glue      it and a random-init control of the same shape, ELECTRA's fine-tuning
                           recipe, 3 seeds, full dev sets (test sets not predicted); on a CPU, the
                           published encoder minilm-l6 (sentence-transformers/all-MiniLM-L6-v2) too
  3. harness compare       pre-trained vs control, and the published encoder vs pre-trained, per
                           task and GLUE: difference, 95% CI, p, verdict
  4. harness report        the leaderboard (Markdown, HTML, FLOPs-vs-GLUE plot) and MLflow rows
  5. harness export onnx   the published encoder's best SST-2 seed, int8 (GPU plan: the better
                           arm's best STS-B seed), checked against PyTorch
  6. harness predict       one sentence through the ONNX bundle, in a process without torch

Plans: on a CPU, in fp32 whatever the CPU: electra-tiny to 1e14 FLOPs, then SST-2, STS-B and RTE
with 1,500 training examples each, and minilm-l6 on SST-2 and MRPC with 500 (about 30 minutes on
two idle cores: 30.1 on a Xeon, 2026-12-02); on a GPU, ELECTRA-Small to 5e15 FLOPs or four
minutes, then STS-B, RTE and MRPC on 1,000 examples each for 3 epochs (about 8 minutes on an
H200, compilation included).
Rerunning resumes: finished pre-training, task x seed fine-tunings and the bundle are kept.

examples:
  harness demo
  harness demo --output runs/demo-2 --device cpu"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo", help="the whole pipeline in about 30 minutes on two CPU cores: pre-train, fine-tune beside a "
                     "control and a published encoder, compare, "
                     "report, export, predict", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pre-train a small ELECTRA to a FLOPs budget, fine-tune it and an untrained control on "
                    "GLUE beside a published encoder, test the differences, write the leaderboard, export "
                    "the published encoder's model (GPU plan: the better arm's) to ONNX and predict with it.")
    parser.add_argument("--output", type=Path, default=Path("runs/demo"), metavar="DIR",
                        help="where everything goes; an existing one is resumed (default: %(default)s)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                        help="picks the plan: cuda -> ELECTRA-Small, cpu -> electra-tiny (default: auto)")
    parser.add_argument("--data-dir", help="classic glue_data folder (default: $GLUE_DIR, else "
                                           "$SHARED_DIR/data/glue, else ../shared/data/glue)")
    parser.add_argument("--corpus", help="pre-training text (default: the shared data/corpus/gutenberg)")
    parser.add_argument("--tracking-uri", help=mlflow_runs.TRACKING_HELP)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from foundation.infra.errors import UserError
    from harness.experiments.demo import Demo, choose_plan, default_inputs, run_demo

    data_dir, corpus = default_inputs(args.data_dir, args.corpus)
    demo = Demo(args.output, choose_plan(args.device), corpus, data_dir, args.tracking_uri)
    summary = run_demo(demo)
    print(closing(demo, summary))
    if summary["diverged"]:  # some seeds diverged but every arm kept a score: say so, exit 2
        raise UserError(summary["diverged"])
    return 0


def detector_line(found: dict) -> list[str]:
    """How well the pre-trained detector spots replaced tokens, against its generator and a fixed source."""
    if "disc_auc_unigram" not in found:
        return []
    live = found.get("disc_auc", float("nan"))
    lines = [f"end of pre-training: replaced-token AUC {found['disc_auc_unigram']:.3f} on a fixed unigram "
             f"corruption (pretrain/probe.py; 0.5 = chance), {live:.3f} against its own generator's samples"]
    if "position_cosine" in found:
        lines.append(f"  encoder collapse: positions' mean cosine {found['position_cosine']:.2f} on the "
                     "probe batch (random-init electra-tiny 0.22, MLM at 1e14 FLOPs 0.32, collapsed ELECTRA "
                     "runs 0.60-0.95; reports/results/pretrain-levers.md)")
    return [*lines, ""]


def better_line(summary: dict) -> str:
    """The better arm as harness compare's GLUE row decides it, and, without a published act (whose
    encoder is the one exported, export_line), which arm was exported."""
    if summary["better"]:
        verdict = f"better model: {summary['better']} (GLUE p = {summary['glue_p_value']:.3f})"
        exported = f"ONNX bundle {summary['bundle']}"
    else:
        p_value = f", p = {summary['glue_p_value']:.3f}" if summary["glue_p_value"] is not None else ""
        verdict = f"better model: neither ({summary['glue_verdict'] or 'no GLUE comparison'}{p_value})"
        exported = f"exported the higher GLUE median, {summary['exported']}: ONNX bundle {summary['bundle']}"
    return verdict if summary.get("published") else f"{verdict}; {exported}"


def published_lines(summary: dict) -> list[str]:
    """The three measured models side by side, and the published encoder against the pre-trained arm."""
    found = summary.get("published")
    if not found:
        return []
    return ["the three measured models (dev x100, mean over seeds [95% interval], the paper's metric):",
            "", found["table"], "",
            f"harness compare (A = {found['model']}, B = pre-trained, on the tasks both trained):", "",
            found["comparison"], ""]


def export_line(summary: dict) -> str:
    found = summary.get("published")
    if not found:
        return better_line(summary)
    from tasks.registry import GLUE_TASKS

    task = GLUE_TASKS[summary["plan"]["export_task"]].dir_name
    return f"exported: {found['model']}'s best {task} seed, int8: ONNX bundle {summary['bundle']}"


def closing(demo, summary: dict) -> str:
    """The tables, the prediction, and where every output is."""
    from harness.tracking import mlflow_leaderboard

    out = demo.output_dir
    prediction = summary["prediction"]
    lines = ["", *detector_line(summary.get("detector", {})),
             "pre-trained vs random-init control (dev scores x100, median over seeds):", "",
             (out / "efficiency.md").read_text().rstrip(), "",
             "harness compare (A = pre-trained, B = control):",
             "", summary["comparison"], "",
             *published_lines(summary),
             better_line(summary), *([export_line(summary)] if summary.get("published") else []),
             f"$ {prediction['command']}", "  " + str(prediction["output"]).replace("'", '"')
             + f"   ({prediction['seconds']:.1f} s, a fresh process without torch)", "",
             f"demo finished in {summary['wall_time_s'] / 60:.1f} min (this invocation). Outputs:",
             f"  {out / 'efficiency.md'}, .csv, .png   the table and the GLUE-vs-FLOPs plot",
             f"  {out / 'pretrain'}/                 the pre-trained generator and discriminator",
             *(f"  {run_dir}/results.json   every seed's scores; predictions/ and models/ beside it"
               for run_dir in summary["glue_dirs"]),
             f"  {out / 'report' / 'leaderboard.html'}   the leaderboard with the paper's published rows",
             f"  {summary['bundle']}/   the ONNX bundle (harness predict --bundle ...)",
             f"  {out / 'demo.json'}   this summary",
             "browse the MLflow leaderboard (its runs table, in the saved 'Leaderboard' view):",
             f"  {mlflow_leaderboard.browse_hint(demo.tracking_uri)}"]
    return "\n".join(lines)
