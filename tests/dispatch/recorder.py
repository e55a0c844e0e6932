"""A pod backend for dispatch tests that keeps what it is asked to create, instead of creating it."""

from __future__ import annotations


class Recorder:
    """A backend that keeps the pods it is asked to create (what dispatch built)."""

    name = "recorder"

    def __init__(self) -> None:
        self.created: list = []

    def create_pod(self, pod) -> None:
        self.created.append(pod)

    def delete_pod(self, **kwargs) -> None:
        return None
