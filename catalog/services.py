"""Apps at their edge: create, update (a new version), rename, delete, read, and submit through the
workflow submission path (docs/design.md §11, "Apps"). The functions the API, the pages and any other
client (an assistant's tool) call; each takes the acting user and raises the API's errors.

Who may do what: every signed-in user sees every app (names are global, as in OSMO) and may submit
any of them to a pool they may use; only an app's owner (or staff) adds versions to it, renames it or
deletes its versions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Q, QuerySet

from catalog.models import App, AppVersion, AppVersionStatus
from catalog.parameters import DESCRIPTION_MAX, Parameter, name_problems, parameters, unknown_values
from osmo.errors import NameTakenError, NotFoundError, OsmoError, ValidationFailedError
from osmo.types import User, Viewer
from parsing.loader import BAD_TEXT_MESSAGE, storable_text
from workflows.choices import Priority
from workflows.errors import WorkflowSpecInvalidError
from workflows.models import Workflow
from workflows.preview import workflow_dry_run
from workflows.services import AppOrigin, workflow_submit
from workflows.spec import SpecError, SpecInvalidError
from workflows.spec.loader import SpecLimits, load_document
from workflows.spec.model import ScalarValue
from workflows.spec.parser import TOP_FIELDS
from workflows.spec.template import render_spec
from workflows.templating import template_limits

logger = logging.getLogger(__name__)


class AppNotFoundError(NotFoundError):
    code = "app_not_found"

    def __init__(self, name: str, version: int | None = None) -> None:
        what = f"App {name[:80]!r} has no version {version}" if version is not None else \
            f"App {name[:80]!r} does not exist"
        path = "version" if version is not None else "name"
        super().__init__(f"{what} (osmo app list --all-users lists the apps).",
                         details={"errors": [{"path": path, "message": what}]})


class AppVersionDeletedError(OsmoError):
    http_status = 410
    code = "app_version_deleted"

    def __init__(self, name: str, version: int | None) -> None:
        message = (f"Version {version} of app {name!r} was deleted." if version is not None
                   else f"Every version of app {name!r} was deleted (osmo app update adds a new one).")
        super().__init__(message, details={"errors": [{"path": "version", "message": message}]})


class AppForbiddenError(OsmoError):
    http_status = 403
    code = "app_forbidden"

    def __init__(self, name: str, owner: str, action: str) -> None:
        super().__init__(f"App {name!r} is {owner}'s: only its owner (or staff) may {action} it.",
                         details={"owner": owner})


@dataclass(frozen=True, slots=True)
class AppShown:
    """``osmo app show``: the app, the version read and its parameters."""

    app: App
    version: AppVersion
    parameters: list[Parameter]


# ------------------------------------------------------------------------------------------------
# Reads
# ------------------------------------------------------------------------------------------------
def app_queryset() -> QuerySet[App]:
    """Apps with ``latest_version`` (their newest version not deleted; None when every one was)."""
    return App.objects.select_related("owner").annotate(
        latest_version=Max("versions__version", filter=Q(versions__status=AppVersionStatus.READY)))


def app_list(*, viewer: Viewer, name: str | None = None, users: list[str] | None = None,
             all_users: bool = False, order: str = "desc") -> QuerySet[App]:
    """``osmo app list``: apps with a version not deleted. By default the viewer's: those they made a
    version of or started a workflow from (OSMO's); ``users``: those these users own; ``all_users``:
    every one. ``name``: the name contains it (case-insensitive). Newest first, or oldest with
    ``order="asc"``."""
    apps = app_queryset().filter(Q(latest_version__isnull=False))
    if users:
        apps = apps.filter(owner__username__in=users)
    elif not all_users:
        started = Workflow.objects.filter(submitted_by=viewer.pk, app_uuid__isnull=False).values("app_uuid")
        mine = App.objects.filter(Q(versions__created_by=viewer.pk) | Q(uuid__in=started)).values("pk")
        apps = apps.filter(pk__in=mine)
    if name:
        apps = apps.filter(name__icontains=name)
    return apps.order_by(*(("created_at", "pk") if order == "asc" else ("-created_at", "-pk")))


def app_get(name: str) -> App:
    """The app ``name`` with ``latest_version`` (:func:`app_queryset`); ``AppNotFoundError`` if none."""
    app = app_queryset().filter(name=name).first()
    if app is None:
        raise AppNotFoundError(name)
    return app


def app_versions(app: App, *, version: int | None = None, order: str = "asc") -> QuerySet[AppVersion]:
    """The app's versions (deleted ones included, as ``osmo app info`` lists them), or only ``version``."""
    versions = app.versions.select_related("created_by").order_by("version" if order == "asc" else "-version")
    return versions.filter(version=version) if version is not None else versions


def app_version_get(app: App, version: int | None = None) -> AppVersion:
    """The version ``version`` of ``app``, or its newest version not deleted. ``AppNotFoundError`` for a
    version it never had, ``AppVersionDeletedError`` for a deleted one."""
    found = app.versions.select_related("created_by")
    if version is None:
        row = found.filter(status=AppVersionStatus.READY).order_by("-version").first()
    else:
        row = found.filter(version=version).first()
        if row is None:
            raise AppNotFoundError(app.name, version)
    if row is None or row.status == AppVersionStatus.DELETED:
        raise AppVersionDeletedError(app.name, version)
    return row


def app_show(name: str, *, version: int | None = None) -> AppShown:
    """``osmo app show``: the app, its version (the newest by default) and its parameters, each with its
    default and the comment that documents it."""
    app = app_get(name)
    row = app_version_get(app, version)
    try:
        found = parameters(row.spec_text)
    except SpecInvalidError:  # stored specs were checked; one from before a rule changed shows none
        found = []
    return AppShown(app=app, version=row, parameters=found)


# ------------------------------------------------------------------------------------------------
# Writes
# ------------------------------------------------------------------------------------------------
def spec_check(text: object) -> str:
    """The spec of an app version, checked: text within the spec's size limit; a ``default-values``
    section of plain values; a template that renders with those defaults into a mapping of the spec's
    sections with a ``workflow`` that has a ``name``. The pool-dependent checks (resources, topology
    keys) run when it is submitted, as for any spec. Raises ``WorkflowSpecInvalidError`` (paths within
    the spec) or ``ValidationFailedError`` (path ``spec``)."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationFailedError([{"path": "spec", "message": "required: the workflow spec (YAML text)"}])
    if not storable_text(text):
        raise ValidationFailedError([{"path": "spec", "message": BAD_TEXT_MESSAGE}])
    limits = SpecLimits()
    if len(text.encode()) > limits.max_bytes:
        raise ValidationFailedError([{"path": "spec", "message": f"larger than {limits.max_bytes} bytes"}])
    try:
        parameters(text, limits)
        rendered = render_spec(text, limits=template_limits(), spec_limits=limits)
        document = load_document(rendered.text, limits, [])
    except SpecInvalidError as exc:
        raise WorkflowSpecInvalidError(exc.to_list(), "The app's spec is invalid.") from exc
    errors = [SpecError(str(key), f"unknown section {str(key)[:80]!r}; a spec has {', '.join(TOP_FIELDS)}")
              for key in document if key not in TOP_FIELDS]
    body = document.get("workflow")
    if not isinstance(body, dict):
        errors.append(SpecError("workflow", "required: a mapping with the workflow's name and tasks or groups"))
    elif not body.get("name"):
        errors.append(SpecError("workflow.name", "required"))
    if errors:
        raise WorkflowSpecInvalidError([error.to_dict() for error in errors], "The app's spec is invalid.")
    return text


def _description_check(description: object) -> str:
    if description is None:
        return ""
    if not isinstance(description, str):
        raise ValidationFailedError([{"path": "description", "message": "must be text"}])
    if not storable_text(description):
        raise ValidationFailedError([{"path": "description", "message": BAD_TEXT_MESSAGE}])
    if len(description) > DESCRIPTION_MAX:
        raise ValidationFailedError([{"path": "description", "message": f"at most {DESCRIPTION_MAX} characters"}])
    return description


def _name_check(name: object, path: str = "name") -> str:
    problems = name_problems(name, path=path)
    if problems:
        raise ValidationFailedError([{"path": where, "message": message} for where, message in problems])
    assert isinstance(name, str)
    return name


def _may_change(app: App, user: User, action: str) -> None:
    if app.owner_id != user.pk and not user.is_staff:
        raise AppForbiddenError(app.name, app.owner.get_username(), action)


def app_create(*, owner: User, name: object, description: object, spec: object) -> AppVersion:
    """A new app ``name`` with its version 1. Raises ``ValidationFailedError`` (name, description),
    ``WorkflowSpecInvalidError`` (the spec) or ``NameTakenError`` (an app of that name exists: names
    are global). Nothing is stored when any check fails."""
    clean_name = _name_check(name)
    clean_description = _description_check(description)
    text = spec_check(spec)
    taken = NameTakenError([{"path": "name", "message": f"an app named {clean_name!r} exists already; "
                                                         "osmo app update adds a version to it"}],
                           f"An app named {clean_name!r} exists already (app names are global).")
    if App.objects.filter(name=clean_name).exists():
        raise taken
    try:
        with transaction.atomic():
            app = App.objects.create(name=clean_name, description=clean_description, owner=owner)
            version = AppVersion.objects.create(app=app, version=1, spec_text=text, created_by=owner)
    except IntegrityError as exc:  # the same name created at once
        raise taken from exc
    logger.info("app.created", extra={"app": clean_name, "user": owner.get_username()})
    return version


def app_update(*, user: User, name: str, spec: object) -> AppVersion:
    """A new version of ``name`` with ``spec`` (the versions before it are kept): its number is one
    more than the highest the app ever had, deleted ones included."""
    text = spec_check(spec)
    with transaction.atomic():
        app = App.objects.select_for_update().select_related("owner").filter(name=name).first()
        if app is None:
            raise AppNotFoundError(name)
        _may_change(app, user, "update")
        last = app.versions.aggregate(last=Max("version"))["last"] or 0
        version = AppVersion.objects.create(app=app, version=last + 1, spec_text=text, created_by=user)
    logger.info("app.updated", extra={"app": name, "version": version.version, "user": user.get_username()})
    return version


def app_rename(*, user: User, name: str, new_name: object) -> App:
    """Rename ``name`` to ``new_name`` (workflows started from it keep the name they were started with,
    and its id)."""
    clean = _name_check(new_name, "new_name")
    taken = NameTakenError([{"path": "new_name", "message": f"an app named {clean!r} exists already"}],
                           f"An app named {clean!r} exists already (app names are global).")
    try:
        with transaction.atomic():
            app = App.objects.select_for_update().select_related("owner").filter(name=name).first()
            if app is None:
                raise AppNotFoundError(name)
            _may_change(app, user, "rename")
            if App.objects.filter(name=clean).exclude(pk=app.pk).exists():
                raise taken
            app.name = clean
            app.save(update_fields=["name"])
    except IntegrityError as exc:
        raise taken from exc
    logger.info("app.renamed", extra={"app": clean, "from": name, "user": user.get_username()})
    return app


def app_delete(*, user: User, name: str, version: int | None = None, all_versions: bool = False) -> list[int]:
    """Delete one version of ``name`` or all of them (OSMO's: one of the two must be asked for). A
    deleted version keeps its row and number, without its spec; the app keeps its name and
    ``osmo app update`` adds a version again. Returns the versions deleted now."""
    if (version is None) == (not all_versions):
        raise ValidationFailedError([{"path": "version", "message": "give either a version or all_versions, "
                                                                    "not both or neither"}])
    with transaction.atomic():
        app = App.objects.select_for_update().select_related("owner").filter(name=name).first()
        if app is None:
            raise AppNotFoundError(name)
        _may_change(app, user, "delete")
        rows = app.versions.exclude(status=AppVersionStatus.DELETED)
        if version is not None:
            if not app.versions.filter(version=version).exists():
                raise AppNotFoundError(name, version)
            rows = rows.filter(version=version)
        deleted = sorted(rows.values_list("version", flat=True))
        rows.update(status=AppVersionStatus.DELETED, spec_text="")
    logger.info("app.deleted", extra={"app": name, "versions": deleted, "user": user.get_username()})
    return deleted


# ------------------------------------------------------------------------------------------------
# Submit
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AppSubmission:
    """What :func:`app_submit` did: the workflow stored (``created`` False: an idempotent replay), or
    the dry run's answer."""

    app: App
    version: AppVersion
    workflow: Workflow | None = None
    created: bool = False
    dry_run: dict[str, Any] | None = None
    warnings: tuple[dict[str, str], ...] = ()


def app_submit(*, user: User, name: str, version: int | None = None,
               values: dict[str, ScalarValue] | None = None, env: dict[str, str] | None = None,
               pool_name: str | None = None, priority: str = Priority.NORMAL, team: str | None = None,
               dry_run: bool = False, idempotency_key: str | None = None,
               labels: dict[str, str] | None = None) -> AppSubmission:
    """Start a workflow from an app version (the newest by default) with ``values`` over its
    parameters' defaults, through the workflow submission path: the same validation against the pool,
    pool access and maintenance checks, quotas and dry run. A value that is no parameter of the app is
    refused (path ``set.<name>``). ``labels`` go over the spec's ``workflow.labels`` as ``--label`` does
    for any submission. The workflow records the app and version."""
    app = app_get(name)
    row = app_version_get(app, version)
    values = dict(values or {})
    try:
        known = parameters(row.spec_text)
    except SpecInvalidError as exc:
        raise WorkflowSpecInvalidError(exc.to_list()) from exc
    unknown = unknown_values(values, known)
    if unknown:
        raise WorkflowSpecInvalidError([error.to_dict() for error in unknown],
                                       f"App {app.name} has no parameter {unknown[0].path.split('.', 1)[1]!r}.")
    if dry_run:
        answer = workflow_dry_run(pool_name=pool_name, spec=row.spec_text, values=values or None, env=env or None,
                                  user=user, priority=priority, team=team, labels=labels)
        return AppSubmission(app=app, version=row, dry_run=answer)
    warnings: list[dict[str, str]] = []
    workflow, created = workflow_submit(
        user=user, pool_name=pool_name, spec=row.spec_text, priority=priority, idempotency_key=idempotency_key,
        team=team, values=values or None, env=env or None, warnings=warnings, labels=labels,
        app=AppOrigin(uuid=str(app.uuid), name=app.name, version=row.version))
    return AppSubmission(app=app, version=row, workflow=workflow, created=created, warnings=tuple(warnings))
