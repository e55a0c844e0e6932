"""The settings the service reads from its environment are the ones docs/operations.md lists
("Settings (environment)" and the tables around it), and the other way round.

Read: every variable of the typed groups (``osmo/config/groups.py``), a literal name passed to
``env.<type>("NAME", ...)``, ``os.environ.get("NAME")``,
``os.environ["NAME"]`` or ``os.getenv("NAME")``, or assigned to a ``..._ENV`` constant, in the service's
and the CLI's code (not the tests, the benchmarks or the task runtime inside a pod, whose variables
the service sets itself). Listed: every ``OSMO_*`` name in operations.md must be read somewhere
(in Python, the shell scripts or the Makefile).
"""

from __future__ import annotations

import re
from pathlib import Path

from osmo.config.groups import GROUPS, variables

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
CODE_DIRS = ("osmo", "ops", "workflows", "scheduler", "credentials", "pages", "cli", "parsing", "topology")
READ = re.compile(
    r"""(?:\benv(?:\.\w+)?\(|os\.environ\.get\(|os\.getenv\(|os\.environ\[)\s*["']([A-Z][A-Z0-9_]+)["']"""
    r"""|\b\w*_ENV\s*=\s*["']([A-Z][A-Z0-9_]+)["']""")
#: Read from the environment, but not settings of the service: the shell's, the test runner's, a task's
#: own environment in its spec (the simulated backend's, docs/spec.md) and what the service hands its
#: task runtime.
NOT_SETTINGS = {"TERM", "PYTEST_XDIST_WORKER", "OSMO_TEST_WORKER_ISOLATED", "XDG_CONFIG_HOME", "HOME",
                "OSMO_SIM_SECONDS", "OSMO_SIM_EXIT_CODE", "OSMO_TASK_PLAN"}


def names_read() -> dict[str, str]:
    found: dict[str, str] = {name: "osmo/config/groups.py" for name in variables()}
    for directory in CODE_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            for match in READ.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(match.group(1) or match.group(2), path.relative_to(ROOT).as_posix())
    return {name: where for name, where in found.items() if name not in NOT_SETTINGS}


def test_every_variable_the_code_reads_is_in_operations_md():
    documented = OPERATIONS.read_text(encoding="utf-8")
    read = names_read()
    assert "OSMO_DATA_DIR" in read and "GUNICORN_BIND" in read  # the scan finds the settings
    missing = sorted(f"{name} (read in {where})" for name, where in read.items() if f"`{name}`" not in documented
                     and not re.search(rf"`[^`]*\b{name}\b[^`]*`", documented))
    assert missing == []


def test_every_osmo_variable_operations_md_names_is_read():
    sources = [p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py")]
    sources += [ROOT / "Makefile", *(ROOT / "scripts").glob("*.sh")]
    code = "\n".join(p.read_text(encoding="utf-8") for p in sources)
    named = set(re.findall(r"\bOSMO_[A-Z0-9_]*[A-Z0-9]\b", OPERATIONS.read_text(encoding="utf-8")))
    # OSMO_METRICS_DIR is the Django setting PROMETHEUS_MULTIPROC_DIR fills (said so in the table).
    unread = sorted(name for name in named - {"OSMO_METRICS_DIR"}
                    if not re.search(rf"""["'$]{{?{name}\b""", code))
    assert unread == []


def test_every_group_has_a_table_listing_its_variables():
    """Each group of ``osmo.config`` has its own table in operations.md (a heading naming its accessor),
    and that table names every variable of the group and says where each knob lives."""
    documented = OPERATIONS.read_text(encoding="utf-8")
    for group in GROUPS:
        heading = re.search(rf"^### .*\(`osmo\.config\.{group}\(\)`\)$", documented, re.MULTILINE)
        assert heading, group
        table = documented[heading.end():].split("\n### ", 1)[0]
        assert "| where it lives |" in table, group
        unlisted = [name for name, (owner, _) in variables().items() if owner == group and f"`{name}`" not in table]
        assert unlisted == [], group
