"""``osmo app``: stored, parameterised workflow templates (docs/cli.md "Apps"), over ``/api/apps/``.
OSMO's commands and options: an app is named ``NAME`` or, for one version, ``NAME:VERSION`` (or
``--version N``). Registered on the app of :mod:`cli.main`."""

from __future__ import annotations

import json
import uuid
from enum import StrEnum
from typing import Any

import typer
from typer.core import TyperCommand

from cli import render
from cli.api import Api, q, results
from cli.errors import EXIT_USAGE, ApiError, CliError
from cli.main import (
    FORMAT_OPTION,
    JSON_OPTION,
    LABEL_OPTION,
    SET_ENV_OPTION,
    SET_OPTION,
    SET_STRING_OPTION,
    FormatType,
    Priority,
    api_client,
    app,
    wants_json,
)
from cli.output import echo_json, echo_lines
from cli.specs import label_fields, label_refusal, read_spec, submission_pool, template_fields, warnings_print
from cli.spread import TEMPLATE_OPTIONS, is_value, option_values_spread

app_app = typer.Typer(help="Apps: reusable, parameterised workflow specs stored in the service and shared with "
                           "other users.", no_args_is_help=True)
app.add_typer(app_app, name="app")

TAB = "  "
VERSION_OPTION = typer.Option(None, "--version", "-v", min=1, help="A version (same as NAME:VERSION; default: the "
                                                                   "newest).")


class Order(StrEnum):
    ASC = "asc"
    DESC = "desc"


class AppListCommand(TyperCommand):
    """``list``: ``--user a b`` read as ``--user a --user b`` (OSMO's ``nargs='+'``)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, option_values_spread(args, ("--user", "-u"), is_value))


class AppSubmitCommand(TyperCommand):
    """``submit``: ``--set a=1 b=2`` read as ``--set a=1 --set b=2`` (OSMO's CLI)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, option_values_spread(args, TEMPLATE_OPTIONS))


def app_ref(name: str, version: int | None = None) -> tuple[str, int | None]:
    """``NAME`` or ``NAME:VERSION`` (and ``--version``) as ``(name, version)``; a usage error otherwise."""
    base, sep, given = name.partition(":")
    if not base or (sep and not given.isdigit()) or (sep and int(given) < 1):
        raise CliError(f"{name!r}: expected NAME or NAME:VERSION (a number from 1)", exit_code=EXIT_USAGE)
    parsed = int(given) if sep else None
    if parsed is not None and version is not None and parsed != version:
        raise CliError(f"{name!r} and --version {version} name two versions", exit_code=EXIT_USAGE)
    return base, parsed if parsed is not None else version


def _params(version: int | None) -> dict[str, Any]:
    return {"version": version} if version is not None else {}


def _not_found(name: str, version: int | None) -> str:
    return f"app {name}{'' if version is None else f' version {version}'} not found"


def _spec(api: Api, name: str, version: int | None) -> dict[str, Any]:
    answer: dict[str, Any] = api.get(f"/api/apps/{q(name)}/spec/", params=_params(version),
                                     not_found=_not_found(name, version))
    return answer


def _read_file(file: str | None) -> str:
    if not file:
        raise CliError("give the app's spec with --file FILE (- reads stdin)", exit_code=EXIT_USAGE)
    text, _label = read_spec(file)
    return text


def _confirm(question: str, force: bool) -> bool:
    if force:
        return True
    return typer.confirm(question, default=False)


@app_app.command("create")
def app_create(
    name: str = typer.Argument(..., help="Name of the app (letters, digits, '-' and '_'; global)."),
    description: str = typer.Option(..., "--description", "-d", help="Description of the app."),
    file: str = typer.Option(None, "--file", "-f", help="Path to the app file (a workflow spec; - reads stdin)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Create a workflow app (its version 1)."""
    base, version = app_ref(name)
    if version is not None:
        raise CliError("cannot create a specific version of an app", exit_code=EXIT_USAGE)
    text = _read_file(file)
    with api_client() as api:
        try:
            _status, answer = api.post("/api/apps/", json={"name": base, "description": description, "spec": text})
        except ApiError as exc:
            if exc.status == 409:
                raise CliError(exc.message, hint="To add a version to it, use: osmo app update "
                                                 f"{base} --file {file}") from None
            raise
    if json_out:
        echo_json(answer)
        return
    typer.echo(f"App {answer['name']} created successfully")


@app_app.command("update")
def app_update(
    name: str = typer.Argument(..., help="Name of the app; NAME:VERSION compares with that version."),
    file: str = typer.Option(None, "--file", "-f", help="Path to the app file (- reads stdin)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Add a version to a workflow app (the versions before it are kept)."""
    base, version = app_ref(name)
    text = _read_file(file)
    with api_client() as api:
        try:
            current = _spec(api, base, version).get("spec")
        except ApiError as exc:
            if version is not None or exc.status not in (404, 410):
                raise
            current = None  # every version deleted: this one is the next
        if current == text:
            typer.echo("No version was created because no changes were made to the app.")
            return
        _status, answer = api.post(f"/api/apps/{q(base)}/versions/", json={"spec": text},
                                   not_found=_not_found(base, None))
    if json_out:
        echo_json(answer)
        return
    typer.echo(f"App {answer['name']} updated successfully")
    typer.echo(f"Version: {answer['version']}")


@app_app.command("info")
def app_info(
    name: str = typer.Argument(..., help="Name of the app, or NAME:VERSION for one version."),
    count: int = typer.Option(20, "--count", "-c", min=1, help="Display the given number of app versions."),
    order: Order = typer.Option(Order.ASC, "--order", "-o", case_sensitive=False,
                                help="asc: latest at the bottom; desc: latest at the top."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Show app and app version information."""
    base, version = app_ref(name)
    with api_client() as api:
        answer = api.get(f"/api/apps/{q(base)}/", params={**_params(version), "limit": count, "order": order.value},
                         not_found=_not_found(base, version))
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    lines = [f"Name: {answer['name']}", f"UUID: {answer['uuid']}", f"Owner: {answer['owner']}",
             f"Create Date: {render.fmt_time(answer['created_at'])}", f"Description: {answer['description']}", ""]
    rows = [(item["version"], item["created_by"], render.fmt_time(item["created_at"]), item["status"])
            for item in answer["versions"]]
    echo_lines(lines + render.table(["VERSION", "CREATED BY", "CREATED DATE", "STATUS"], rows))


def parameter_lines(answer: dict[str, Any]) -> list[str]:
    """``osmo app show``: OSMO's DESCRIPTION and PARAMETERS blocks, each parameter as ``name: default``
    with the comment that documents it."""
    lines = ["DESCRIPTION", f"{TAB}{answer.get('description') or '-'}", ""]
    found = answer.get("parameters") or []
    if not found:
        return [*lines, "This app has no parameters (no default-values in its spec)."]
    lines.append("PARAMETERS")
    for parameter in found:
        default = parameter.get("default")
        shown = default if isinstance(default, str) else json.dumps(default)
        comment = f"  # {parameter['comment']}" if parameter.get("comment") else ""
        lines.append(f"{TAB}{parameter['name']}: {shown}{comment}")
    return lines


@app_app.command("show")
def app_show(
    name: str = typer.Argument(..., help="Name of the app, or NAME:VERSION."),
    version: int = VERSION_OPTION,
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Show app parameters: each with its default and the comment documenting it."""
    base, chosen = app_ref(name, version)
    with api_client() as api:
        answer = api.get(f"/api/apps/{q(base)}/parameters/", params=_params(chosen),
                         not_found=_not_found(base, chosen))
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    echo_lines(parameter_lines(answer))


@app_app.command("spec")
def app_spec(
    name: str = typer.Argument(..., help="Name of the app, or NAME:VERSION."),
    version: int = VERSION_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Show app spec (the template as written)."""
    base, chosen = app_ref(name, version)
    with api_client() as api:
        answer = _spec(api, base, chosen)
    if json_out:
        echo_json(answer)
        return
    typer.echo(str(answer["spec"]).rstrip("\n"))


@app_app.command("list", cls=AppListCommand)
def app_list(
    name: str = typer.Option(None, "--name", "-n", help="Display apps that have the given substring in their name."),
    user: list[str] = typer.Option(None, "--user", "-u", help="Display the apps these users own: --user a b."),
    all_users: bool = typer.Option(False, "--all-users", "-a", help="Display all apps with no filtering on users."),
    count: int = typer.Option(20, "--count", "-c", min=1, max=500, help="Display the given number of apps."),
    order: Order = typer.Option(Order.ASC, "--order", "-o", case_sensitive=False,
                                help="asc: latest at the bottom; desc: latest at the top."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Lists the apps you created, updated or submitted (--user: those users own; --all-users: all)."""
    params: dict[str, Any] = {"limit": count, "order": "desc"}  # the newest COUNT, then shown in --order
    if name:
        params["name"] = name
    if user:
        params["user"] = list(user)
    if all_users:
        params["all_users"] = "true"
    with api_client() as api:
        answer = api.get("/api/apps/", params=params)
    items = results(answer)
    if order == Order.ASC:
        items = items[::-1]
    if wants_json(json_out, format_type):
        echo_json({"apps": items})
        return
    if not items:
        typer.echo("There are no apps to view.")
        return
    rows = [(item["owner"], item["name"], item["description"], render.fmt_time(item["created_at"]),
             item["latest_version"]) for item in items]
    echo_lines(render.table(["OWNER", "NAME", "DESCRIPTION", "CREATED DATE", "LATEST VERSION"], rows))


@app_app.command("delete")
def app_delete(
    name: str = typer.Argument(..., help="Name of the app with the version to delete: NAME:VERSION."),
    version: int = VERSION_OPTION,
    all_versions: bool = typer.Option(False, "--all", "-a", help="Delete all versions of the app."),
    force: bool = typer.Option(False, "--force", "-f", help="Delete without confirmation."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Delete a workflow app version you created (or every version with --all)."""
    base, chosen = app_ref(name, version)
    if all_versions and chosen is not None:
        raise CliError("give either NAME:VERSION or --all, not both", exit_code=EXIT_USAGE)
    if not all_versions and chosen is None:
        raise CliError("must specify a version (NAME:VERSION or --version) or --all", exit_code=EXIT_USAGE)
    what = f"all versions in app {base}" if all_versions else f"app {base} version {chosen}"
    if not _confirm(f"Are you sure you want to delete {what}?", force):
        typer.echo("Nothing deleted.")
        return
    query = "all_versions=true" if all_versions else f"version={chosen}"
    with api_client() as api:
        _status, answer = api.delete(f"/api/apps/{q(base)}/?{query}", not_found=_not_found(base, chosen))
    if json_out:
        echo_json(answer)
        return
    if not answer["versions"]:
        typer.echo(f"App {base} has no version left to delete.")
    for deleted in answer["versions"]:
        typer.echo(f"App {base} version {deleted} deleted.")


@app_app.command("rename")
def app_rename(
    original_name: str = typer.Argument(..., help="Original name of the app."),
    new_name: str = typer.Argument(..., help="New name for the app."),
    force: bool = typer.Option(False, "--force", "-f", help="Rename without confirmation."),
) -> None:
    """Rename a workflow app (workflows started from it keep the name they were started with)."""
    for given in (original_name, new_name):
        if app_ref(given)[1] is not None:
            raise CliError("cannot rename a specific version of an app", exit_code=EXIT_USAGE)
    if not _confirm(f"Are you sure you want to rename app {original_name} to {new_name}?", force):
        typer.echo("Nothing renamed.")
        return
    with api_client() as api:
        _status, answer = api.post(f"/api/apps/{q(original_name)}/rename/", json={"new_name": new_name},
                                   not_found=_not_found(original_name, None))
    typer.echo(f"App {original_name} renamed to {answer['name']} successfully.")


@app_app.command("submit", cls=AppSubmitCommand)
def app_submit(
    name: str = typer.Argument(..., help="Name of the app, or NAME:VERSION (default: the newest version)."),
    version: int = VERSION_OPTION,
    set_values: list[str] = SET_OPTION,
    set_strings: list[str] = SET_STRING_OPTION,
    set_env: list[str] = SET_ENV_OPTION,
    pool: str = typer.Option(None, "--pool", "-p", help="The target pool (default: the spec's, else the profile's)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and preview the placement; submit nothing."),
    priority: Priority = typer.Option(Priority.NORMAL, "--priority", case_sensitive=False),
    team: str = typer.Option(None, "--team", help="The team whose GPU quota in the pool it counts against."),
    labels: list[str] = LABEL_OPTION,
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Submit a workflow from an app version, with --set values over its parameters' defaults."""
    as_json = wants_json(json_out, format_type)
    base, chosen = app_ref(name, version)
    fields = template_fields(set_values, set_strings, set_env)
    with api_client() as api:
        spec = _spec(api, base, chosen)
        chosen_pool = submission_pool(pool, str(spec["spec"]))
        body = {"version": spec["version"], **({"pool": chosen_pool} if chosen_pool else {}),
                "priority": priority.value, "dry_run": dry_run, **fields, **({"team": team} if team else {}),
                **label_fields(labels)}
        headers = {} if dry_run else {"Idempotency-Key": str(uuid.uuid4())}
        try:
            status_code, answer = api.post(f"/api/apps/{q(base)}/submit/", json=body, headers=headers,
                                           not_found=_not_found(base, chosen))
        except ApiError as exc:
            label_refusal(exc)
            raise
    warnings_print(answer, f"app {base}")
    if as_json:
        echo_json(answer)
        return
    if dry_run:
        echo_lines(render.dry_run_lines(answer, pool=str(answer.get("pool") or chosen_pool)))
        return
    workflow_id = answer.get("id")
    again = " (already submitted with this key)" if status_code == 200 else ""
    typer.echo(f"Submitted workflow {workflow_id} from app {base} version {spec['version']} to pool "
               f"{answer.get('pool')} (priority {answer.get('priority')}): {answer.get('status')}{again}")
    typer.echo(f"Follow it with: osmo workflow query {workflow_id}")
