"""Where a fine-tuning step's time goes on this machine: each phase of the loop's step timed apart.

Runs the loop's own pieces (tasks/batching's loader and collator, the autocast, ELECTRA's optimiser
and schedule from tasks/optim, clipping) one phase at a time, so each phase's wall time is its own:
on a CPU every operator returns when its work is done, so no synchronisation is needed between
phases. Then one prediction pass over the dev set, and torch.profiler's costliest operators over a
few steps. The step is the one `tasks/finetune.py` runs (its `_forward_backward` is called as is).

    python benchmarks/finetune_profile.py --model tiny --task mrpc
    python benchmarks/finetune_profile.py --model /path/to/all-MiniLM-L6-v2 --task sst2 --size base
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from foundation.models.presets import PRESETS, discriminator_config  # noqa: E402
from foundation.training import placement  # noqa: E402
from foundation.training.optimization import build_schedule  # noqa: E402
from tasks import batching, glue  # noqa: E402
from tasks.config import FinetuneConfig  # noqa: E402
from tasks.finetune import _forward_backward, predict  # noqa: E402
from tasks.glue_data import load_glue  # noqa: E402
from tasks.optim import build_optimizer  # noqa: E402
from tasks.registry import GLUE_TASKS  # noqa: E402

PHASES = ("collate", "forward+backward", "clip", "optimizer", "schedule+zero_grad", "loss read")


def build(args, device):
    """(model, built task, resolved config) for --model (an ELECTRA preset's random init, or a folder)."""
    task = GLUE_TASKS[args.task]
    transformers.set_seed(0)
    if args.model in ("tiny", "small", "base"):
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.shared / "models" /
                                                               "electra-small-discriminator")
        shape = discriminator_config(PRESETS[f"electra-{args.model}"], len(tokenizer), num_labels=2)
        model_of = lambda attention: transformers.AutoModelForSequenceClassification.from_config(  # noqa: E731
            shape, attn_implementation=attention)
        size = PRESETS[f"electra-{args.model}"].size
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
        model_of = lambda attention: transformers.AutoModelForSequenceClassification.from_pretrained(  # noqa: E731
            args.model, num_labels=2, attn_implementation=attention)
        size = args.size
    data = load_glue(task, args.shared / "data" / "glue")
    data["train"] = data["train"].shuffle(seed=0).select(range(args.examples))
    built = glue.build_task(task, data, tokenizer, max_length=128)
    built.evals = {"validation": built.evals["validation"]}
    config = FinetuneConfig(precision=args.precision, eval_batch_size=args.eval_batch_size).resolved(
        size, 1, 128)
    precision = placement.resolve_precision(config.precision, device)
    attention = placement.resolve_attention(args.attention, device, precision)
    return model_of(attention).to(device), built, config, tokenizer, precision, attention


def timed_steps(model, built, config, tokenizer, precision, steps: int, device):
    """Per-phase seconds of `steps` training steps (after two untimed ones)."""
    collate = batching.collator(tokenizer)
    loader = batching.train_loader(built.train, config.batch_size, 0, config.group_by_length, collate)
    optimizer = build_optimizer(model, config.learning_rate, config.layerwise_lr_decay, config.weight_decay,
                                config.adam_epsilon, config.lr_decay_depth, config.optimizer)
    schedule = build_schedule(optimizer, 10_000, config.warmup_fraction, config.optimizer)
    autocast, scaler = placement.autocast(device, precision), placement.grad_scaler(device, precision)
    model.train()
    times = {phase: [] for phase in PHASES}
    loss_sum = torch.zeros((), device=device)
    batches = iter(loader)
    for step in range(steps + 2):
        marks = [time.perf_counter()]
        batch = {key: value.to(device) for key, value in next(batches).items()}
        marks.append(time.perf_counter())
        loss = _forward_backward(model, False, batch, config, autocast, scaler)
        marks.append(time.perf_counter())
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        marks.append(time.perf_counter())
        scaler.step(optimizer)
        scaler.update()
        marks.append(time.perf_counter())
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        loss_sum += loss.detach().float()
        marks.append(time.perf_counter())
        float(loss_sum)  # what the loop does every 20 steps; here every step, to show its cost
        marks.append(time.perf_counter())
        if step >= 2:
            for phase, start, end in zip(PHASES, marks[:-1], marks[1:], strict=True):
                times[phase].append(end - start)
    return times, optimizer, schedule, loader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, small, base (ELECTRA shapes) or a folder")
    parser.add_argument("--size", default="small", help="the recipe row for a folder's model")
    parser.add_argument("--task", default="mrpc", choices=["mrpc", "sst2"])
    parser.add_argument("--examples", type=int, default=1000, help="training examples to draw from")
    parser.add_argument("--steps", type=int, default=20, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds, the attentions taking turns")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--attention", default="auto", help="comma-separated: auto, eager, sdpa")
    parser.add_argument("--eval-batch-size", type=int, default=128)
    parser.add_argument("--profile", type=int, default=3, metavar="STEPS", help="torch.profiler steps")
    parser.add_argument("--shared", type=Path,
                        default=Path(os.environ.get("SHARED_DIR", REPO.parent / "shared")))
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    device = torch.device("cpu")
    built_by = {}
    for attention in args.attention.split(","):
        args.attention = attention
        built_by[attention] = build(args, device)
    times = {attention: {phase: [] for phase in PHASES} for attention in built_by}
    for _ in range(args.rounds):  # the attentions take turns, so load from elsewhere hits them alike
        for attention, (model, built, config, tokenizer, precision, _) in built_by.items():
            taken, *_ = timed_steps(model, built, config, tokenizer, precision, args.steps, device)
            for phase, values in taken.items():
                times[attention][phase] += values
    for attention, (model, built, config, tokenizer, precision, used) in built_by.items():
        report(args, model, built, config, tokenizer, precision, used, times[attention], device)
    if args.profile:
        model, built, config, tokenizer, precision, _ = next(iter(built_by.values()))
        profile(model, built, config, tokenizer, precision, args.profile, device)


def report(args, model, built, config, tokenizer, precision, attention, times, device) -> None:
    parameters = sum(p.numel() for p in model.parameters())
    print(f"{args.model} ({parameters / 1e6:.1f}M parameters), {args.task}, batch {config.batch_size}, "
          f"{precision}, attention {attention}, optimizer {config.optimizer}; cpu, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}, load {os.getloadavg()[0]:.2f}")
    step = sum(statistics.median(values) for values in times.values())
    for phase, values in times.items():
        median = statistics.median(values)
        print(f"  {phase:20s} {median * 1e3:8.1f} ms  {median / step:6.1%}")
    print(f"  {'step (sum of medians)':20s} {step * 1e3:8.1f} ms  = {config.batch_size / step:.1f} ex/s")
    dev = built.evals["validation"]
    started = time.perf_counter()
    predict(model, built, {"validation": dev}, config, batching.collator(tokenizer),
            placement.autocast(device, precision))
    eval_s = time.perf_counter() - started
    print(f"  evaluation: {len(dev)} examples in {eval_s:.2f} s ({len(dev) / eval_s:.0f} ex/s, eval batch "
          f"{config.eval_batch_size})")


def profile(model, built, config, tokenizer, precision, steps: int, device) -> None:
    from torch.profiler import profile as profiler

    with profiler() as prof:
        timed_steps(model, built, config, tokenizer, precision, steps, device)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=50))


if __name__ == "__main__":
    main()
