"""Dispatch backends behind one interface (see :mod:`scheduler.dispatch.base`)."""

from __future__ import annotations

from scheduler.dispatch.base import (
    DispatchBackend,
    DispatchPermanentError,
    DispatchTransientError,
    PodRequest,
    PodState,
)


def backend_for(name: str, **options) -> DispatchBackend:
    """The backend named by a pool's ``backend`` field."""
    if name == "kubernetes":
        from scheduler.dispatch.kubernetes import KubernetesBackend

        return KubernetesBackend.from_settings(**options)
    from scheduler.dispatch.simulated import SimulatedBackend

    return SimulatedBackend()


__all__ = ["DispatchBackend", "DispatchPermanentError", "DispatchTransientError", "PodRequest", "PodState",
           "backend_for"]
