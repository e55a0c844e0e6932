"""The pure packages import nothing from Django, DRF or Celery (docs/design.md §2), and the scheduler's inventory
code imports nothing from the workflows app (dependencies between the apps go one way), and raw SQL is
written only in the modules named for it (docs/architecture.md, "Raw SQL"), and no module is over 500 lines
without saying why in its docstring (docs/architecture.md, "Module size")."""

import ast
import os
import re
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
    "scheduler/admin",
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


# Raw SQL: only where the ORM cannot say it, in one module per app that gives each statement's reason.
SQL_MODULES = {
    "osmo/bulk.py": "many-row writes without the ORM's per-object steps (its docstring)",
    "osmo/beat.py": "beat's session-level advisory lock, on a psycopg connection of its own",
    "scheduler/sql.py": "the scheduler app's statements the ORM cannot say",
    "workflows/sql.py": "the workflows app's statements the ORM cannot say",
    "ops/sql.py": "the readiness probe's round trip",
}
PACKAGES = ("osmo", "pages", "ops", "workflows", "scheduler", "credentials", "catalog", "topology", "parsing", "cli",
            "runtime", "mcp_server")
RAW_CALLS = {"cursor", "execute", "executemany", "raw", "extra"}  # connection.cursor(), Manager.raw(), QuerySet.extra()
RAW_NAMES = {"RawSQL"}


def raw_sql_uses(path: Path) -> list[str]:
    """Each use of raw SQL in ``path`` as ``line: what``: a call of ``.cursor()``, ``.execute()``,
    ``.executemany()``, ``.raw()`` or ``.extra()``, and any mention of ``RawSQL``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RAW_CALLS:
            found.append((node.lineno, f".{node.func.attr}()"))
        elif isinstance(node, ast.Name) and node.id in RAW_NAMES:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in RAW_NAMES:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and any(alias.name in RAW_NAMES for alias in node.names):
            found.append((node.lineno, f"import {', '.join(alias.name for alias in node.names)}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_raw_sql_lives_only_in_the_sql_modules():
    # given every module of the project's packages but migrations (tests and benchmarks are no packages of it)
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             if "migrations" not in path.parts]
    assert len(files) > 100
    # when each is searched for raw SQL
    uses = {str(path.relative_to(ROOT)): raw_sql_uses(path) for path in files}
    # then only the named SQL modules have any, and each of them has some
    assert {path: found for path, found in uses.items() if found and path not in SQL_MODULES} == {}
    assert [path for path in SQL_MODULES if not uses[path]] == []


def test_raw_sql_search_finds_each_kind_of_use(tmp_path):
    # given a module with each kind of raw SQL and one without
    module = tmp_path / "module.py"
    module.write_text(
        "from django.db import connection\n"
        "from django.db.models.expressions import RawSQL\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('SELECT 1')\n"
        "Node.objects.raw('SELECT * FROM node')\n"
        "Node.objects.extra(where=['1 = 1'])\n"
        "expressions.RawSQL('1', ())\n",
        encoding="utf-8",
    )
    clean = tmp_path / "clean.py"
    clean.write_text("from django.db import connection\nvendor = connection.vendor\n", encoding="utf-8")
    # when they are searched
    # then every use is found, and nothing in the clean one
    assert raw_sql_uses(module) == ["2: import RawSQL", "3: .cursor()", "4: .execute()", "5: .raw()", "6: .extra()",
                                    "7: RawSQL"]
    assert raw_sql_uses(clean) == []


# Size: a module past 500 lines is split into modules of one job each, or its docstring says why it is not.
LONG_MODULE_LINES = 500
NOT_MODULES = {"tests", "bench", "migrations", "var", "node_modules", "__pycache__"}  # (and hidden folders)
SIZE_REASON = re.compile(r"over\s+500\s+lines", re.IGNORECASE)


def project_modules() -> list[Path]:
    """Every Python module of the project: its packages and top-level scripts, not its tests, benchmarks
    or migrations."""
    found = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in NOT_MODULES and not d.startswith("."))
        found += [Path(top, name) for name in sorted(files) if name.endswith(".py")]
    return found


def long_modules_without_reason(paths: list[Path]) -> dict[str, int]:
    """The modules of ``paths`` over 500 lines whose docstring does not say why (``over 500 lines``), with
    their line counts."""
    offenders = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > LONG_MODULE_LINES and not SIZE_REASON.search(ast.get_docstring(ast.parse(text)) or ""):
            offenders[str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)] = lines
    return offenders


def test_no_module_is_over_500_lines_without_a_reason_in_its_docstring():
    # given every module of the project
    modules = project_modules()
    assert len(modules) > 300
    assert ROOT / "scheduler" / "dispatch" / "kubernetes.py" in modules
    assert not [path for path in modules if {"tests", "bench", "migrations"} & set(path.relative_to(ROOT).parts)]
    # when their sizes and docstrings are read
    offenders = long_modules_without_reason(modules)
    # then each one over 500 lines says why it stays whole
    assert offenders == {}


def test_long_module_search_finds_a_long_module_without_a_reason(tmp_path):
    # given a long module without a reason, a long one with it (wrapped over two lines), and a short one
    body = "".join(f"value_{index} = {index}\n" for index in range(LONG_MODULE_LINES))
    bare = tmp_path / "bare.py"
    bare.write_text('"""Many values."""\n' + body, encoding="utf-8")
    reasoned = tmp_path / "reasoned.py"
    reasoned.write_text('"""Many values. It stays over 500\nlines: one table read whole."""\n' + body, encoding="utf-8")
    in_code = tmp_path / "in_code.py"
    in_code.write_text('"""Many values."""\nNOTE = "over 500 lines"\n' + body, encoding="utf-8")
    short = tmp_path / "short.py"
    short.write_text('"""Few values."""\n' + body[:200], encoding="utf-8")
    # when they are searched
    # then the long ones without a reason in their docstring are found, with their line counts
    assert long_modules_without_reason([bare, reasoned, in_code, short]) == {
        str(bare): LONG_MODULE_LINES + 1, str(in_code): LONG_MODULE_LINES + 2}
