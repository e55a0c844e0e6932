"""The pages app's place among the apps: `pages` may read `workflows` and `scheduler`, through the
stable names of `workflows` only; nothing imports `pages` (osmo/urls.py includes it by name); the
scheduler's domain tree, which the pages and the admin share, reads nothing of `workflows` or `pages`.
Static: the imports written in the source files, no database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What the pages may use of the workflows app: module -> names (None: any name of the module).
WORKFLOWS_API: dict[str, set[str] | None] = {
    "workflows.services": {"workflow_submit", "workflow_cancel"},
    "workflows.preview": {"workflow_dry_run"},
    "workflows.selectors": None,
    "workflows.models": None,
    "workflows.choices": None,
    "workflows.errors": None,
    "workflows.scheduling.observe": {"task_log"},  # the task page's log download (the page reads the API live)
}


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every import in the file; name is None for ``import module``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def _python_files(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def test_pages_use_only_the_stable_names_of_workflows():
    # given
    files = _python_files("pages")

    # when
    used = {
        (str(path.relative_to(ROOT)), module, name)
        for path in files
        for module, name in _imports(path)
        if module == "workflows" or module.startswith("workflows.")
    }

    # then
    assert len(files) >= 10
    outside = sorted(
        (path, module, name)
        for path, module, name in used
        if module not in WORKFLOWS_API or (WORKFLOWS_API[module] is not None and name not in WORKFLOWS_API[module])
    )
    assert outside == []
    assert ("pages/views.py", "workflows.services", "workflow_submit") in used  # the scan sees the imports


@pytest.mark.parametrize("folder", ["osmo", "workflows", "scheduler", "cli", "bench", "catalog"])
def test_nothing_imports_pages(folder):
    # when
    importers = sorted(
        str(path.relative_to(ROOT))
        for path in _python_files(folder)
        if any(module == "pages" or module.startswith("pages.") for module, _name in _imports(path))
    )

    # then
    assert importers == []


def test_osmo_urls_include_the_pages_by_name():
    assert 'path("", include("pages.urls"))' in (ROOT / "osmo" / "urls.py").read_text()


@pytest.mark.parametrize("module", ["scheduler/reads/domains.py", "scheduler/selectors.py"])
def test_the_shared_domain_tree_reads_no_workflows_or_pages(module):
    # when
    imported = {name for name, _ in _imports(ROOT / module)}

    # then
    assert sorted(name for name in imported if name.split(".")[0] in ("workflows", "pages")) == []
    assert "scheduler.models" in imported  # the scan sees the imports
