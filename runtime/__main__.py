"""``python -m runtime [PLAN_FILE]``: run one task plan (docs/runtime.md).

The plan is read from PLAN_FILE, or from the ``OSMO_TASK_PLAN`` environment variable when no file is
given (the Kubernetes pod's way). The result goes to ``--result`` (default: ``OSMO_RESULT_PATH``, else
``/dev/termination-log`` when it exists, Kubernetes' termination message).
"""

from __future__ import annotations

import argparse
import os
import sys

from runtime.run import main_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="osmo-runtime", description="Run one OSMO task plan.")
    parser.add_argument("plan", nargs="?", help="the plan's JSON file (default: $OSMO_TASK_PLAN)")
    parser.add_argument("--result", default=None, help="where to write the result JSON")
    options = parser.parse_args(argv)
    if options.plan:
        with open(options.plan, encoding="utf-8") as handle:
            text = handle.read()
    else:
        text = os.environ.get("OSMO_TASK_PLAN", "")
    result_path = options.result
    if result_path is None:
        result_path = os.environ.get("OSMO_RESULT_PATH") or (
            "/dev/termination-log" if os.path.exists("/dev/termination-log") else "")
    return main_run(text, result_path=result_path)


if __name__ == "__main__":
    sys.exit(main())
