"""`harness tasks`: the benchmark tasks the registry knows."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("tasks", help="list the tasks",
                                   description="List GLUE, SQuAD and tagging tasks, and the kinds your own "
                                               "files can be.")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from tasks.registry import GLUE_TASKS, SQUAD_TASKS

    print(f"{'task':8} {'metrics':30} {'labels':32} {'epochs':6} note")
    for task in GLUE_TASKS.values():
        labels = ",".join(task.label_names) if task.label_names else "regression 0..5"
        note = f"predicted with the {task.predicted_by.upper()} model" if task.predicted_by else ""
        row = f"{task.name:8} {','.join(task.metrics) or '-':30} {labels:32} {task.num_epochs:<6} {note}"
        print(row.rstrip())
    for task in SQUAD_TASKS.values():
        labels = "answer spans" + (", unanswerable" if task.has_unanswerable else "")
        note = f"harness run squad --version {task.version}"
        print(f"{task.name:8} {','.join(task.metrics):30} {labels:32} {task.num_epochs:<6} {note}")
    from tasks.tagging_task import NAMED
    from tasks.tagging_task import NUM_EPOCHS as TAGGING_EPOCHS
    from tasks.text_task import KIND_METRICS, NUM_EPOCHS

    for name, corpus in NAMED.items():
        print(f"{name:8} {'f1,precision,recall,accuracy':30} {'phrase tags (conlleval)':32} "
              f"{TAGGING_EPOCHS:<6} harness run tagging --task {name} ({corpus.folder})")
    print("your own files (harness run text, headline metric first; harness run tagging for tagged files):")
    for kind, names in KIND_METRICS.items():
        print(f"  {kind:14} {','.join(names):30} {NUM_EPOCHS} epochs")
    return 0
