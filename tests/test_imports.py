"""Package boundaries (STYLE.md section 1, README "Architecture"): imports form a DAG of layers.

Every import in the project, deferred ones included, is read from the source and mapped to a
layer; an edge between two layers that ALLOWED does not list fails the test, naming the file.
"""

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "tasks", "pretrain", "reports")
# The lowest layer: what every package shares. These modules import nothing else of ours.
FOUNDATION = {"pretrain.errors", "pretrain.models", "pretrain.flops", "pretrain.atomic", "pretrain.device"}

# layer -> the layers it may import (besides itself). Anything else is a violation.
ALLOWED = {
    "harness.cli": {"harness.commands", "foundation"},
    "harness.commands": {"harness", "tasks", "pretrain", "reports", "foundation"},  # parse, then call
    "harness": {"tasks", "pretrain", "reports", "foundation"},  # orchestration
    "reports": {"tasks", "foundation"},  # reads results and checkpoints; never trains
    "tasks": {"foundation"},
    "pretrain": {"foundation"},
    "foundation": set(),
}


def layer(module: str) -> str | None:
    """The layer of a dotted module name, or None for third-party and standard-library modules."""
    if module in FOUNDATION:
        return "foundation"
    top = module.split(".")[0]
    if top not in PACKAGES:
        return None
    if top == "harness":
        if module == "harness.cli":
            return "harness.cli"
        if module.startswith("harness.commands"):
            return "harness.commands"
    return top


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at module level or inside functions (`from a import b` gives a.b too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def project_files() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]


def edges() -> dict[tuple[str, str], set[str]]:
    """(from layer, to layer) -> files that make the edge; only names that are real modules count."""
    modules = {module_name(path) for path in project_files()}
    found: dict[tuple[str, str], set[str]] = {}
    for path in project_files():
        source = layer(module_name(path))
        for name in imported_modules(path):
            if name in PACKAGES or (name.split(".")[0] in PACKAGES and name not in modules):
                continue  # `from pretrain import atomic` names the (empty) package and a function-less module
            target = layer(name)
            if target is not None and target != source:
                found.setdefault((source, target), set()).add(f"{path.relative_to(REPO)} imports {name}")
    return found


def test_allowed_layers_form_a_dag():
    order = list(graphlib.TopologicalSorter(ALLOWED).static_order())  # raises CycleError on a cycle
    assert order[0] == "foundation" and order[-1] == "harness.cli"


def test_every_import_follows_an_allowed_edge():
    found = edges()
    assert found, "no imports between layers found: the scan is broken"
    bad = {f"{a} -> {b}": sorted(files) for (a, b), files in found.items() if b not in ALLOWED[a]}
    assert bad == {}


def test_only_the_cli_imports_the_commands():
    from harness.cli import COMMANDS

    importers = {a for (a, b) in edges() if b == "harness.commands"}
    assert importers <= {"harness.cli"}
    # cli.py imports them by name (importlib): every command module is one it knows.
    modules = {p.stem for p in (REPO / "harness" / "commands").glob("*.py") if p.stem != "__init__"}
    assert modules == set(COMMANDS)


@pytest.mark.parametrize("module", sorted(FOUNDATION))
def test_foundation_modules_exist(module):
    assert (REPO / (module.replace(".", "/") + ".py")).is_file()


def test_the_onnx_predictor_needs_neither_torch_nor_transformers():
    # In a fresh interpreter: the predictor and everything it imports, as a deployment would load them.
    code = ("import sys, reports.onnx_predictor, harness.commands.predict; "
            "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_forbidden_edge_is_caught(tmp_path, monkeypatch):
    # The scan itself can fail: a tasks module importing pretrain.train is reported.
    fake = REPO / "tasks" / "_boundary_probe.py"
    fake.write_text("def f():\n    from pretrain.train import pretrain\n")
    try:
        found = edges()
    finally:
        fake.unlink()
    assert "tasks/_boundary_probe.py imports pretrain.train" in found[("tasks", "pretrain")]
    assert "pretrain" not in ALLOWED["tasks"]
