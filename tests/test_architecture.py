"""The pure packages import nothing from Django, DRF or Celery (docs/design.md §2), and the scheduler's inventory
code imports nothing from the workflows app (dependencies between the apps go one way)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN = ("django", "rest_framework", "celery", "kombu", "scheduler.models", "workflows.models")


@pytest.mark.parametrize(
    "module", ["workflows.spec", "scheduler.placement", "scheduler.preemption", "parsing", "scheduler.inventory",
               "runtime", "runtime.run", "scheduler.dispatch.local", "scheduler.dispatch.pod.runtime_wrap",
               "scheduler.dispatch.pod.manifest", "scheduler.dispatch.local_mounts", "scheduler.dispatch.local_exec",
               "scheduler.hold", "scheduler.fairshare"]
)
def test_pure_package_imports_no_framework(module):
    # given a fresh interpreter
    code = (
        f"import sys, {module}; "
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m in {FORBIDDEN!r}); "
        "print(','.join(bad))"
    )
    # when the pure package is imported
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # then no framework module was loaded
    assert result.stdout.strip() == ""


def test_parsing_imports_neither_app():
    # given a fresh interpreter
    code = (
        "import sys, parsing; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('workflows', 'scheduler'))))"
    )
    # when the shared parsing package is imported
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # then neither app was loaded
    assert result.stdout.strip() == ""


ROOT = Path(__file__).resolve().parents[1]
# The scheduler's inventory code: the pure package, its services, and their commands, API and admin.
INVENTORY_CODE = [
    "scheduler/inventory",
    "scheduler/services/__init__.py",
    "scheduler/services/pools.py",
    "scheduler/services/inventory.py",
    "scheduler/services/kubernetes_sync.py",
    "scheduler/management/commands",
    "scheduler/api",
    "scheduler/admin.py",
]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, function-local imports included."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize("location", INVENTORY_CODE)
def test_scheduler_inventory_code_imports_nothing_from_workflows(location):
    # given the files of one location
    base = ROOT / location
    files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
    assert files
    # when their imports are read
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "workflows")
        for path in files
    }
    # then none comes from the workflows app
    assert {path: modules for path, modules in offenders.items() if modules} == {}
