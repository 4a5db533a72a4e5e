"""Package boundaries (STYLE.md section 1, CONTRIBUTING.md, "The allowed imports"): imports form a DAG of layers.

Every import in the project, deferred ones included, is read from the source and mapped to a
layer; an edge between two layers that ALLOWED does not list fails the test, naming the file.
"""

import ast
import functools
import graphlib
import shutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("harness", "tasks", "pretrain", "reports", "foundation")
# The foundation, what both features stand on, is its own top-level package of three places, each a layer
# named for what it holds: foundation/infra/ (errors, atomic writes, settings, secrets), foundation/training/
# (the kit both training loops are made of) and foundation/models/ (model identity: shapes, presets,
# checkpoints, FLOPs). pretrain/ and tasks/ stand side by side on it.
FOUNDATION = {"foundation.infra": "infra", "foundation.training": "training", "foundation.models": "models"}

# layer -> the layers it may import (besides itself). Anything else is a violation.
ALLOWED = {
    "harness.cli": {"harness.commands", "infra", "training"},  # training: a stopped loop's exit
    "harness.commands": {"harness", "tasks", "pretrain", "reports", *FOUNDATION.values()},  # parse, then call
    "harness": {"tasks", "pretrain", "reports", *FOUNDATION.values()},  # orchestration
    "reports": {"tasks", "infra", "models"},  # reads results and checkpoints; never trains
    "tasks": {"infra", "training"},  # fine-tuning: neither pre-training nor model identity
    "pretrain": {*FOUNDATION.values()},
    "models": {"infra"},
    "training": {"infra"},
    "infra": set(),
}

# harness/ by feature: a subpackage per thing a user does, each importing only the features listed
# (and harness.config, the settings loading every command shares). Besides them harness/ holds only
# cli.py, config.py and the thin command modules.
FEATURES = {
    "tracking": set(),  # MLflow: runs that always end, the leaderboard experiment, its report
    "finetuning": {"tracking"},  # harness run glue|squad
    "pretraining": {"tracking"},  # harness pretrain
    "search": {"finetuning", "tracking"},  # harness search
    "deploy": {"finetuning", "tracking"},  # harness export onnx
    "experiments": {"finetuning", "pretraining", "deploy", "tracking", "grid"},  # experiment, demo, compare
    "publish": set(),  # harness card and push: a run's saved models, their cards, the Hub upload
    "grid": {"finetuning", "tracking"},  # many models x tasks x seeds: a local pool or Slurm, one driver
}
# kinds: the registry of kinds of task; api and api_results: the Python API (`import harness`), over the features
HARNESS_TOP = {"harness", "harness.cli", "harness.config", "harness.kinds", "harness.api", "harness.api_results"}


def layer(module: str) -> str | None:
    """The layer of a dotted module name, or None for third-party and standard-library modules."""
    for place, name in FOUNDATION.items():
        if module == place or module.startswith(place + "."):
            return name
    top = module.split(".")[0]
    if top not in PACKAGES:
        return None
    if top == "harness":
        if module == "harness.cli":
            return "harness.cli"
        if module.startswith("harness.commands"):
            return "harness.commands"
    return top


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: Collection[str] = ()) -> set[str]:
    """Every module a file imports, at module level or inside functions (`from a import b` gives a.b too,
    and a itself unless every b is one of `modules`: `from harness import kinds` imports what
    `import harness.kinds` does, the submodule, not what harness/__init__.py defines)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; the scan reads absolute ones only"
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            named = {f"{node.module}.{alias.name}" for alias in node.names}
            names |= named if all(name in modules for name in named) else {node.module, *named}
    return names


def project_files(root: Path = REPO) -> list[Path]:
    return [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))]


def is_bare_package(path: Path) -> bool:
    return path.name == "__init__.py" and all(isinstance(node, ast.Expr) for node in ast.parse(path.read_text()).body)


@functools.cache  # seven tests read the checkout's graph; no file under a root changes once it is read
def module_graph(root: Path = REPO) -> dict[str, dict[str, set[str]]]:
    """module -> {imported project module or package: how it was named}; only real modules count.
    Parsed once per root: callers must not change what it returns."""
    modules = {module_name(path, root): path for path in project_files(root)}
    graph = {}
    for name, path in modules.items():
        # `from foundation.infra import atomic` names the package and the module: keep the module (a
        # package whose __init__.py is only a docstring is no module to depend on).
        graph[name] = {target for target in imported_modules(path, modules)
                       if target in modules and not is_bare_package(modules[target])}
    return graph


def edges(root: Path = REPO) -> dict[tuple[str, str], set[str]]:
    """(from layer, to layer) -> the imports that make the edge."""
    found: dict[tuple[str, str], set[str]] = {}
    for name, targets in module_graph(root).items():
        source = layer(name)
        for target in targets:
            if layer(target) != source:
                found.setdefault((source, layer(target)), set()).add(f"{name} imports {target}")
    return found


def test_allowed_layers_form_a_dag():
    order = list(graphlib.TopologicalSorter(ALLOWED).static_order())  # raises CycleError on a cycle
    assert order[0] == "infra" and order[-1] == "harness.cli"


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


def feature(module: str) -> str | None:
    """The harness feature (subpackage) a module belongs to, or None outside them."""
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) > 1 and parts[1] in FEATURES else None


def test_harness_is_grouped_by_feature():
    features = {p.name for p in (REPO / "harness").iterdir() if (p / "__init__.py").is_file()} - {"commands"}
    assert features == set(FEATURES)
    loose = {name for name in module_graph() if name.startswith("harness") and name not in HARNESS_TOP
             and layer(name) != "harness.commands" and feature(name) is None}
    assert loose == set()
    list(graphlib.TopologicalSorter(FEATURES).static_order())  # raises CycleError on a cycle


def feature_violations(root: Path = REPO) -> list[str]:
    return sorted(f"{name} imports {target}" for name, targets in module_graph(root).items() for target in targets
                  if feature(name) and feature(target) and feature(target) != feature(name)
                  and feature(target) not in FEATURES[feature(name)])


def test_features_import_only_the_features_below_them():
    assert feature_violations() == []


def test_modules_import_each_other_without_cycles():
    # Deferred imports count: a function-level import that closes a loop hides a tangle all the same.
    list(graphlib.TopologicalSorter(module_graph()).static_order())  # raises CycleError on a loop


HEAVY = ("torch", "transformers", "datasets")


def test_the_onnx_predictor_needs_neither_torch_nor_transformers():
    # Statically, deferred imports included: everything the predictor and `harness predict` can reach.
    # The pipelines are loaded by name (harness/kinds.py), which no static scan sees: they are named here.
    pipelines = ["harness.deploy.sequence_classification", "harness.deploy.question_answering",
                 "harness.deploy.token_classification"]
    graph, reached, todo = module_graph(), set(), ["harness.deploy.onnx_predictor", "harness.commands.predict",
                                                   "harness.commands.serve", "harness.deploy.serve", *pipelines]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(graph[name])
    heavy = {f"{name} imports {module}" for name in reached
             for module in imported_modules(REPO / (name.replace(".", "/") + ".py"))
             if module.split(".")[0] in HEAVY}
    assert heavy == set()
    # And at run time, in a fresh interpreter, as `harness predict` loads them: the whole CLI parser
    # (every command module) first, then the predictor and the server `harness serve` runs.
    # Every registered pipeline loaded too, and each one named in the static list above.
    code = ("import sys; from harness.cli import build_parser; build_parser(); import harness.deploy.onnx_predictor; "
            "import harness.deploy.serve; from harness.kinds import pipelines; "
            "print(sorted({p.__module__ for p in pipelines().values()})); "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == [repr(sorted(pipelines)), "[]"]


@pytest.mark.parametrize("argv", [["run", "glue", "--model", "m", "--tasks", "rte", "lerning_rate=1"],
                                  ["run", "squad", "--model", "m", "doc_strid=1"]])
def test_a_settings_typo_is_reported_before_torch_loads(argv):
    """Bad settings fail in well under a second: torch and transformers are imported after the check."""
    code = ("import sys; from harness.cli import main\n"
            f"rc = main({argv!r})\n"
            f"print(rc, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert "unknown setting" in result.stderr
    assert result.stdout.strip() == "2 []"


def test_a_forbidden_edge_and_a_cycle_are_caught(tmp_path):
    # The scan itself can fail, on a copy of the tree with a planted tasks -> pretrain.train import
    # a foundation.infra.errors <-> foundation.models.presets loop,
    # and a new foundation module that imports pre-training.
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tasks" / "probe.py").write_text("def f():\n    from pretrain.train import pretrain\n")
    errors = tmp_path / "foundation" / "infra" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef g():\n    from foundation.models.presets import PRESETS\n")
    # The foundation is a place: a module new to foundation/training/ is the training kit, held to its edges.
    (tmp_path / "foundation" / "training" / "newcomer.py").write_text("from pretrain import train\n")
    # MLflow bookkeeping reaching up into a fine-tuning run is a feature edge that is not allowed.
    # (Planted before the first scan: module_graph reads a root once.)
    (tmp_path / "harness" / "tracking" / "upward.py").write_text("from harness.finetuning import glue_finetuning\n")
    found = edges(tmp_path)
    assert found[("tasks", "pretrain")] == {"tasks.probe imports pretrain.train"}
    assert found[("training", "pretrain")] == {"foundation.training.newcomer imports pretrain.train"}
    assert feature_violations(tmp_path) == ["harness.tracking.upward imports harness.finetuning.glue_finetuning"]
    assert "pretrain" not in ALLOWED["tasks"] and "models" not in ALLOWED["tasks"]
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(module_graph(tmp_path)).static_order())


def test_from_a_package_import_its_module_names_the_module_alone(tmp_path):
    # As `import harness.kinds` does; a name harness/__init__.py defines still names the package.
    path = tmp_path / "probe.py"
    modules = {"harness", "harness.kinds", "harness.api"}
    path.write_text("from harness import kinds, api\n")
    assert imported_modules(path, modules) == {"harness.kinds", "harness.api"}
    path.write_text("from harness import kinds, run\n")
    assert imported_modules(path, modules) == {"harness", "harness.kinds", "harness.run"}


def imports_of_test_modules(tests_dir: Path = REPO / "tests") -> list[str]:
    """Imports of a test module from any module of the suite: shared helpers belong in conftest.py or a
    helper module (families.py, pretrain_helpers.py, ...), where no test collection runs."""
    test_modules = {f"tests.{path.stem}" for path in tests_dir.glob("test_*.py")}
    return sorted(f"tests/{path.name} imports {target}" for path in sorted(tests_dir.glob("*.py"))
                  for target in imported_modules(path) if target in test_modules)


def test_no_test_module_imports_another(tmp_path):
    assert imports_of_test_modules() == []
    # The scan can fail: a test module and a helper module that import test modules, deferred or not.
    (tmp_path / "test_a.py").write_text("def test_x():\n    from tests.test_b import helper\n")
    (tmp_path / "test_b.py").write_text("from tests import test_a\n")
    (tmp_path / "helpers.py").write_text("import tests.test_a\n")
    assert imports_of_test_modules(tmp_path) == ["tests/helpers.py imports tests.test_a",
                                             "tests/test_a.py imports tests.test_b",
                                             "tests/test_b.py imports tests.test_a"]


def kind_import_violations(root: Path = REPO) -> list[str]:
    """Imports of a kind's modules (harness/kinds.py's Kind.modules) from outside them, deferred ones too;
    the registry names them as strings."""
    from harness.kinds import KINDS

    owner = {module: kind for kind in KINDS.values() for module in kind.modules}
    return sorted(f"{name} imports {target}" for name, targets in module_graph(root).items() for target in targets
                  if target in owner and name not in owner[target].modules)


def test_only_a_kinds_own_modules_import_them():
    from harness.kinds import KINDS

    graph = module_graph()
    for kind in KINDS.values():  # a kind's modules hold its description and its runner, and exist
        assert {kind.description.partition(":")[0], kind.runner.partition(":")[0]} <= set(kind.modules), kind.name
        assert set(kind.modules) <= set(graph), kind.name
    assert kind_import_violations() == []  # commands and deploy modules included: no exceptions


def test_a_kind_module_imported_from_outside_is_caught(tmp_path):
    # The scan can fail: a command, and one kind's module, each importing another kind's module (deferred).
    for path, text in {"harness/commands/probe.py": "def f():\n    from tasks import glue_data\n",
                       "tasks/tagging_data.py": "from tasks.text_data import decode_utf8\n",
                       "tasks/glue_data.py": "", "tasks/text_data.py": ""}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert kind_import_violations(tmp_path) == ["harness.commands.probe imports tasks.glue_data",
                                                "tasks.tagging_data imports tasks.text_data"]
