"""The pure packages import nothing from Django, DRF or Celery (design §2)."""

import subprocess
import sys

import pytest

FORBIDDEN = ("django", "rest_framework", "celery", "kombu", "scheduler.models", "workflows.models")


@pytest.mark.parametrize("module", ["workflows.spec", "scheduler.placement"])
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
