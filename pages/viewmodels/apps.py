"""View models of the apps pages: the list, and one app with its versions and the launch form's fields."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from catalog.models import App, AppVersion
from catalog.parameters import Parameter
from catalog.services import AppShown, app_versions


@dataclass(frozen=True)
class ParameterField:
    """One parameter in the launch form: a text input prefilled with its default, or (a list or
    mapping default) the default shown, kept as it is."""

    name: str
    default_text: str
    comment: str
    editable: bool


@dataclass(frozen=True)
class AppPage:
    app: App
    version: AppVersion
    versions: list[AppVersion]
    fields: list[ParameterField]
    spec_text: str
    may_change: bool


def default_text(value: Any) -> str:
    """How a default is shown and prefilled: text as it is, other values as YAML would write them."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def parameter_fields(found: list[Parameter]) -> list[ParameterField]:
    return [ParameterField(name=parameter.name, default_text=default_text(parameter.default),
                           comment=parameter.comment,
                           editable=not isinstance(parameter.default, list | dict))
            for parameter in found]


def app_page_build(shown: AppShown, *, may_change: bool) -> AppPage:
    return AppPage(app=shown.app, version=shown.version, versions=list(app_versions(shown.app, order="desc")),
                   fields=parameter_fields(shown.parameters), spec_text=shown.version.spec_text,
                   may_change=may_change)
