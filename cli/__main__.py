"""``python -m cli``: the ``osmo`` command (what the launchers of a task's ``osmo`` run, docs/runtime.md)."""

from cli.main import main

main()
