"""The service's settings by concern, typed: ``osmo.config.scheduler().starvation_seconds``.

Each accessor builds its frozen group (:mod:`osmo.config.groups`, where every knob's variable, type,
default and meaning are) from the Django settings the environment filled at start-up, on each call:
``override_settings`` and pytest-django's ``settings`` fixture (``settings.OSMO_STARVATION_SECONDS = 5``)
reach it. Cheap (a few attribute reads); call it where the value is used, not at import.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from django.conf import settings

from osmo.config.groups import Dispatch, Kubernetes, Observability, Runtime, Scheduler, Security, Sessions, Sso, Web

G = TypeVar("G")


def _group(cls: type[G]) -> G:
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        value = getattr(settings, f.metadata["setting"])
        values[f.name] = tuple(value) if f.metadata["kind"] is tuple else value
    return cls(**values)


def scheduler() -> Scheduler:
    return _group(Scheduler)


def dispatch() -> Dispatch:
    return _group(Dispatch)


def kubernetes() -> Kubernetes:
    return _group(Kubernetes)


def runtime() -> Runtime:
    return _group(Runtime)


def sessions() -> Sessions:
    return _group(Sessions)


def security() -> Security:
    return _group(Security)


def web() -> Web:
    return _group(Web)


def observability() -> Observability:
    return _group(Observability)


def sso() -> Sso:
    return _group(Sso)
