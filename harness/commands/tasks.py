"""`harness tasks`: the benchmark tasks the registry knows."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("tasks", help="list the tasks", description="List GLUE and SQuAD tasks.")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from tasks.registry import GLUE_TASKS

    print(f"{'task':6} {'metrics':18} {'labels':38} {'epochs':6} note")
    for task in GLUE_TASKS.values():
        labels = ",".join(task.label_names) if task.label_names else "regression 0..5"
        note = f"predicted with the {task.predicted_by.upper()} model" if task.predicted_by else ""
        print(f"{task.name:6} {','.join(task.metrics) or '-':18} {labels:38} {task.num_epochs:<6} {note}")
    return 0
