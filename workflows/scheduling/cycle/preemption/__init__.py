"""The placement cycle's preemption step (docs/design.md §9): running LOW gangs as candidates and
evictions kept in memory (``candidates``), and what a HIGH or NORMAL gang does about LOW work within a
walk, packing without it, evicting it, waiting before evicting (``low_work``). The victim search
itself is pure, in :mod:`scheduler.preemption`."""
