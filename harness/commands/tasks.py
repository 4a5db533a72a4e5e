"""`harness tasks`: the named tasks of every kind (tasks/registry.py), and the kinds your own files can be."""

from __future__ import annotations

from harness import kinds


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("tasks", help="list the tasks",
                                   description="List the named tasks of every kind of task (GLUE, SQuAD, "
                                               "tagging corpora), and the kinds your own files can be.")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from tasks.kind_text import task_row

    print(task_row("task", "metrics", "labels", "epochs", "note"))
    for kind in kinds.KINDS.values():
        for line in kinds.load(kind.description).listed():
            print(line)
    return 0
