"""Pure victim choice for preemption (docs/design.md §9): which running LOW gangs to evict, whole, so
that a higher-priority gang fits. ``victims_choose(snapshot, preemptor, candidates, policy)`` returns a
:class:`VictimChoice` (victim keys, where the preemptor goes, GPUs evicted) or None.

Semantics:
- Gang-whole: a victim is evicted entirely (every holding of the candidate is released), never some of
  its tasks.
- Complete: if evicting every candidate lets the preemptor fit, a victim set is returned; otherwise
  None and nothing is to be evicted. The all-evicted case is solved first, so None costs one solve.
- Relevant only: a candidate holding nothing on a machine the preemptor could use is never chosen
  (the search removes any candidate whose eviction is not needed anyway).
- Objective, lexicographic: (1) fewest GPUs evicted from non-borrowing gangs (LOW work beyond its
  team's quota is reclaimed first), (2) least work lost: GPUs times time run up to ``now`` (0
  without it), (3) fewest GPUs evicted, (4) fewest gangs, (5) the most recently started (start
  times sorted descending, compared element by element, later preferred), (6) keys.
  Deterministic: the result does not depend on the order of ``candidates``.
- Bounded: at most ``max_solves`` questions not inferred (solver calls, and those the machines'
  total capacity answers, counted alike) and, when given, ``max_seconds`` of wall clock; exact
  when the search finishes within them (always for 8 candidates or fewer at the default solves),
  else the best set found so far, which always fits.
  A solve that runs out of the solver's own budget ("undecided") counts as "does not fit".

``eviction_window`` / ``within_window``: with a minimum runtime, NORMAL work evicts only LOW gangs
that have run at most twice it (:mod:`scheduler.preemption.window`).

``victims_choose_near`` runs it near where the preemptor would go without LOW work first
(:mod:`scheduler.preemption.near`). The algorithm is in :mod:`scheduler.preemption.search`, the
release arithmetic and the memoised feasibility checks in :mod:`scheduler.preemption.feasibility`.
Stdlib and :mod:`scheduler.placement` only: never import Django, DRF or Celery here.
"""

from scheduler.preemption.near import cordoned, regions_around, restricted, victims_choose_near
from scheduler.preemption.search import DEFAULT_MAX_SOLVES, victims_choose
from scheduler.preemption.types import Candidate, VictimChoice
from scheduler.preemption.window import eviction_window, within_window

__all__ = ["DEFAULT_MAX_SOLVES", "Candidate", "VictimChoice", "cordoned", "eviction_window", "regions_around",
           "restricted", "victims_choose", "victims_choose_near", "within_window"]
