"""Fair share (docs/design.md §9): the pure ordering of a queue by each team's decayed GPU usage
(``order``), and that usage read from the pool's reservations (``usage``, the ORM; import it by its
module, so that the pure part stays importable without Django)."""

from scheduler.fairshare.order import decayed_gpu_seconds, fair_order, usage_by_team

__all__ = ["decayed_gpu_seconds", "fair_order", "usage_by_team"]
