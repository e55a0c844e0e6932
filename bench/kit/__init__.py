"""The test kit that tests and benchmarks both import (no benchmark commands here): synthetic pools
(``pools``), random and planted solver instances (``instances``, ``preemption_instances``), the
placement scenarios (``scenarios``), the exact CP-SAT oracle (``oracle``), the solver's baselines
(``baselines``), the placement cycle's baseline (``cycle_baseline``), deep queues written in bulk
(``queue``) and the consolidation of holdings (``consolidate``). The commands (``python -m bench.X``)
live beside this package in ``bench/`` and import it; it imports none of them (import-linter)."""
