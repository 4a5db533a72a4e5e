"""Package boundaries (STYLE.md section 1): nothing imports harness, and reports never trains."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", ["tasks", "pretrain", "reports"])
def test_no_package_imports_harness(package):
    offenders = {str(path.relative_to(REPO)): sorted(n for n in imported_modules(path) if n.split(".")[0] == "harness")
                 for path in (REPO / package).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert offenders, f"no modules found in {package}/"


def test_reports_never_builds_an_optimizer():
    for path in (REPO / "reports").rglob("*.py"):
        source = path.read_text()
        assert "optim." not in source and "tasks.finetune" not in source, path
