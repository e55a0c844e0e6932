"""The docs cannot drift from the code: every repository path and every dotted Python name they quote
resolves (docs/architecture.md, "Docs that are checked").

Scanned: ``docs/*.md``, ``README.md`` and ``tests/README.md``. Checked, per line:

- inline code spans (`` `...` ``) and link targets (``[text](target)``) outside fenced blocks:
  - a *path*: a span whose first segment is a top-level entry of the repository (``scheduler/...``,
    ``examples/x.yaml``, ``manage.py``), or any span ending in a source/data extension (``.py``,
    ``.yaml``, ...; a bare ``cycle.py`` or a partial ``placement/index.py`` must be the end of some
    file's path). ``path:12`` and ``path::test_name`` (the test must be defined there) are accepted;
  - a *dotted name* whose first segment is a package of the repository: a module, an attribute of one
    (``scheduler.placement.solve``, call arguments ignored), a Django model (``scheduler.PoolEpoch``) or
    a registered Celery task name (``workflows.tick``);
  - ``python -m module`` (or ``-m module``) inside a span: the module exists;
  - a link to another document: the file exists, and its ``#anchor`` is one of its headings;
- inside fenced blocks: ``-m module`` and paths under a top-level directory of the repository.

Spans with placeholders (``<id>``, ``{name}``, ``*``, ``...``) and URLs are not checked. After merging
branches that move code, run ``make test ARGS="tests/test_docs.py"``: each failure names the document,
the line and the reference that no longer resolves.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")) + ["README.md", "tests/README.md"]
SKIPPED_DIRS = {".git", ".venv", "var", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
FILE_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".json", ".html", ".js", ".css", ".sh", ".cfg", ".ini")
PLACEHOLDER = re.compile(r"[<>{}*]|\.\.\.|…")
SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE_FLAG = re.compile(r"(?:^|\s)-m\s+([A-Za-z_][\w.]*)")
DOTTED = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(\(.*\))?$")


@cache
def repo_files() -> frozenset[str]:
    """Every file of the working tree (relative, posix), without caches and virtualenvs."""
    found: set[str] = set()
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        rel = Path(top).relative_to(ROOT)
        found.update((rel / name).as_posix() for name in files)
    return frozenset(found)


@cache
def repo_dirs() -> frozenset[str]:
    dirs: set[str] = set()
    for path in repo_files():
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return frozenset(dirs)


@cache
def top_level() -> frozenset[str]:
    """Top-level entries a quoted path may start with (hidden entries excluded)."""
    return frozenset(p.split("/")[0] for p in repo_files() if not p.startswith("."))


@cache
def packages() -> frozenset[str]:
    """Top-level Python packages of the repository."""
    return frozenset(p.split("/")[0] for p in repo_files() if p.count("/") == 1 and p.endswith("/__init__.py"))


@cache
def celery_task_names() -> frozenset[str]:
    from osmo.celery import app

    app.loader.import_default_modules()
    return frozenset(app.tasks)


def path_problem(ref: str, doc: str) -> str | None:
    """Why the quoted path ``ref`` does not resolve, or None."""
    ref, _, test_name = ref.partition("::")
    ref = re.sub(r":[\d,-]+$", "", ref)
    if ref.startswith("./"):
        ref = ref[2:]
    plain = ref.rstrip("/")
    if plain in repo_files():
        if test_name and not re.search(rf"^\s*(?:async\s+)?def {re.escape(test_name)}\(",
                                       (ROOT / plain).read_text(encoding="utf-8"), re.MULTILINE):
            return f"no test {test_name} in {plain}"
        return None
    if plain in repo_dirs():
        return None
    relative = os.path.normpath(Path(doc).parent / plain).replace(os.sep, "/")
    if relative in repo_files() or relative in repo_dirs():
        return None
    if plain.split("/")[0] not in top_level() and any(f == plain or f.endswith("/" + plain) for f in repo_files()):
        return None  # a partial path or a bare file name: the end of some file's path
    return "no such file or directory"


def name_problem(name: str) -> str | None:
    """Why the dotted name does not resolve (module, attribute, Django model or Celery task), or None."""
    parts = name.split(".")
    module = None
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.util.find_spec(".".join(parts[:i]))
        except (ImportError, ValueError):
            found = None
        if found is not None:
            if i == len(parts):
                return None  # a module: not imported (settings modules have side effects)
            module = importlib.import_module(".".join(parts[:i]))
            obj: object = module
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    break
                obj = getattr(obj, attr)
            else:
                return None
            break
    if len(parts) == 2:
        from django.apps import apps

        try:
            apps.get_model(parts[0], parts[1])
            return None
        except (LookupError, ValueError):
            pass
    if name in celery_task_names():
        return None
    return "no such module, attribute, model or Celery task"


def is_path(ref: str) -> bool:
    head = ref.split("/")[0].split("::")[0]
    return (
        ("/" in ref and head in top_level())
        or re.sub(r"(::\w+|:[\d,-]+)$", "", ref).endswith(FILE_SUFFIXES)
        or (head in top_level() and head.endswith(FILE_SUFFIXES))
    )


def span_problems(span: str, doc: str) -> list[tuple[str, str]]:
    """(reference, problem) for one inline code span."""
    out: list[tuple[str, str]] = []
    for module in MODULE_FLAG.findall(span):
        if importlib.util.find_spec(module) is None:
            out.append((f"-m {module}", "no such module"))
    if PLACEHOLDER.search(span) or "://" in span:
        return out
    words = span.split()
    if len(words) > 1:  # a command: check the paths among its words
        for word in words:
            token = word.strip("\"'").split("=")[-1].strip("\"'")
            if "/" in token and token.split("/")[0] in top_level() and (problem := path_problem(token, doc)):
                out.append((token, problem))
        return out
    if span.startswith("/") or span.startswith("~") or span.startswith("$"):
        return out
    if is_path(span):
        if problem := path_problem(span, doc):
            out.append((span, problem))
        return out
    match = DOTTED.match(span)
    if match and match.group(1).split(".")[0] in packages():
        if problem := name_problem(match.group(1)):
            out.append((span, problem))
    return out


@cache
def anchors(doc: str) -> frozenset[str]:
    """GitHub's anchors of a Markdown file's headings."""
    found: set[str] = set()
    for line in (ROOT / doc).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            found.add(slug)
    return frozenset(found)


def link_problems(target: str, doc: str) -> list[tuple[str, str]]:
    if re.match(r"^[a-z]+:", target) or PLACEHOLDER.search(target):
        return []  # http:, https:, mailto:
    file, _, anchor = target.partition("#")
    resolved = doc if not file else os.path.normpath(Path(doc).parent / file).replace(os.sep, "/")
    if file and resolved not in repo_files() and resolved not in repo_dirs():
        return [(target, "no such file or directory")]
    if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
        return [(target, f"no heading #{anchor} in {resolved}")]
    return []


def unresolved(doc: str, text: str) -> list[str]:
    """Every reference of ``text`` (the contents of ``doc``) that does not resolve, as
    ``doc:line: `reference` (problem)``."""
    out: list[str] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        problems: list[tuple[str, str]] = []
        if fenced:
            for module in MODULE_FLAG.findall(line):
                if importlib.util.find_spec(module) is None:
                    problems.append((f"-m {module}", "no such module"))
            for word in re.findall(r"[\w./-]+", line):
                token = word.rstrip(".,:;")
                if ("/" in token and token.split("/")[0] in top_level() and not PLACEHOLDER.search(token)
                        and (problem := path_problem(token, doc))):
                    problems.append((token, problem))
        else:
            for span in SPAN.findall(line):
                problems.extend(span_problems(span, doc))
            for target in LINK.findall(SPAN.sub("", line)):
                problems.extend(link_problems(target, doc))
        out.extend(f"{doc}:{number}: `{ref}` ({problem})" for ref, problem in problems)
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_and_name_a_doc_quotes_resolves(doc):
    # given a document of the repository
    text = (ROOT / doc).read_text(encoding="utf-8")
    # when every path, dotted name, module and link it quotes is resolved
    problems = unresolved(doc, text)
    # then none is missing
    assert problems == [], "\n".join(problems)


def test_a_path_or_name_that_does_not_exist_is_reported_with_its_line():
    # given a document quoting two real references and five that do not exist
    text = "\n".join([
        "The solver is `scheduler.placement.solve` in `scheduler/placement/solver.py`.",
        "Its aggregated pool was `placement/pool.py`; see [the contract](design.md#5-placement).",
        "Run `python -m bench.nothing_here` or read `scheduler.placement.unsolve`.",
        "```",
        ".venv/bin/python -m bench.placement --scenario nvl72-20k   # real",
        "cat scheduler/placement/missing.py",
        "```",
        "Missing heading: [x](design.md#no-such-heading).",
    ])
    # when it is checked
    problems = unresolved("docs/example.md", text)
    # then exactly the five missing references are named, with their lines
    assert problems == [
        "docs/example.md:2: `placement/pool.py` (no such file or directory)",
        "docs/example.md:3: `-m bench.nothing_here` (no such module)",
        "docs/example.md:3: `scheduler.placement.unsolve` (no such module, attribute, model or Celery task)",
        "docs/example.md:6: `scheduler/placement/missing.py` (no such file or directory)",
        "docs/example.md:8: `design.md#no-such-heading` (no heading #no-such-heading in docs/design.md)",
    ]


def test_models_celery_tasks_and_test_names_resolve_and_their_misspellings_do_not():
    # given references of each kind the resolver accepts besides modules and files
    good = ["scheduler.PoolEpoch", "workflows.tick",
            "tests/test_docs.py::test_every_path_and_name_a_doc_quotes_resolves"]
    bad = ["scheduler.PoolEpochs", "workflows.tock", "tests/test_docs.py::test_nothing"]
    # when they are checked as inline spans
    checked = {ref: span_problems(ref, "docs/example.md") for ref in good + bad}
    # then the real ones resolve and the misspelt ones are reported
    assert {ref: problems for ref, problems in checked.items() if problems} == {
        "scheduler.PoolEpochs": [("scheduler.PoolEpochs", "no such module, attribute, model or Celery task")],
        "workflows.tock": [("workflows.tock", "no such module, attribute, model or Celery task")],
        "tests/test_docs.py::test_nothing": [
            ("tests/test_docs.py::test_nothing", "no test test_nothing in tests/test_docs.py")
        ],
    }
