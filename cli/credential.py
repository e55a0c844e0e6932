"""``osmo credential set | list | delete``: the user's credentials (docs/cli.md "Credentials"), over
``/api/credentials/``. Secrets come from stdin (``--password-stdin``, ``--secret-access-key-stdin``)
or ``KEY=VALUE`` pairs; nothing prints a value. Registered on the app of :mod:`cli.main`."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Any

import typer

from cli import render
from cli.api import q
from cli.errors import EXIT_USAGE, CliError
from cli.main import FORMAT_OPTION, JSON_OPTION, OUTPUT_OPTION, FormatType, Output, api_client, app, wants_json
from cli.output import echo_items, echo_json

credential_app = typer.Typer(help="Your credentials: registry, data and generic secrets your workflows use.",
                             no_args_is_help=True)
app.add_typer(credential_app, name="credential")


class CredentialType(StrEnum):
    GENERIC = "generic"
    REGISTRY = "registry"
    DATA = "data"


def _pairs(items: list[str], option: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{option} {item.split('=', 1)[0]!r}: expected KEY=VALUE", exit_code=EXIT_USAGE)
        if key in values:
            raise CliError(f"{option}: key {key!r} given twice", exit_code=EXIT_USAGE)
        values[key] = value
    return values


def _stdin_secret(option: str) -> str:
    secret = sys.stdin.read().rstrip("\r\n")
    if not secret:
        raise CliError(f"{option}: nothing was read from stdin", exit_code=EXIT_USAGE)
    return secret


def _merge(values: dict[str, str], extra: dict[str, str | None]) -> dict[str, str]:
    for key, value in extra.items():
        if value is None:
            continue
        if key in values:
            raise CliError(f"key {key!r} is given both as KEY=VALUE and by its option", exit_code=EXIT_USAGE)
        values[key] = value
    return values


def _misplaced(kind: CredentialType, given: dict[str, Any]) -> None:
    wrong = [option for option, value in given.items() if value]
    if wrong:
        raise CliError(f"{', '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not apply to a {kind.value} "
                       "credential", exit_code=EXIT_USAGE)


@credential_app.command("set")
def credential_set(
    name: str = typer.Argument(..., help="Credential name (letters, digits, '_', '-', '.')."),
    pairs: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...",
                                      help="Values, OSMO's --payload style: osmo credential set n --type generic "
                                           "--payload a=1 b=2."),
    kind: CredentialType = typer.Option(..., "--type", case_sensitive=False, help="generic, registry or data."),
    value: list[str] = typer.Option(None, "--value", "--payload", help="KEY=VALUE (repeatable)."),
    registry: str = typer.Option(None, "--registry", help="registry: the registry host, e.g. nvcr.io."),
    username: str = typer.Option(None, "--username", help="registry: the user name."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="registry: read the password or token "
                                                                        "(key auth) from stdin."),
    endpoint: str = typer.Option(None, "--endpoint", help="data: the storage URL, e.g. s3://bucket."),
    region: str = typer.Option(None, "--region", help="data: the region (optional)."),
    override_url: str = typer.Option(None, "--override-url", help="data: the HTTP endpoint of an S3-compatible "
                                     "store that is not AWS, e.g. http://minio:9000 (optional)."),
    access_key_id: str = typer.Option(None, "--access-key-id", help="data: the access key id."),
    secret_access_key_stdin: bool = typer.Option(False, "--secret-access-key-stdin",
                                                 help="data: read the secret access key (key access_key) from stdin."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Create or replace one of your credentials. Values are stored encrypted and never shown again."""
    values = _pairs([*(value or []), *(pairs or [])], "--value")
    registry_options = {"--registry": registry, "--username": username, "--password-stdin": password_stdin}
    data_options = {"--endpoint": endpoint, "--region": region, "--override-url": override_url,
                    "--access-key-id": access_key_id,
                    "--secret-access-key-stdin": secret_access_key_stdin}
    if kind is CredentialType.REGISTRY:
        _misplaced(kind, data_options)
        values = _merge(values, {"registry": registry, "username": username,
                                 "auth": _stdin_secret("--password-stdin") if password_stdin else None})
    elif kind is CredentialType.DATA:
        _misplaced(kind, registry_options)
        values = _merge(values, {"endpoint": endpoint, "region": region, "override_url": override_url,
                                 "access_key_id": access_key_id,
                                 "access_key": _stdin_secret("--secret-access-key-stdin")
                                 if secret_access_key_stdin else None})
    else:
        _misplaced(kind, {**registry_options, **data_options})
    if not values:
        raise CliError("no values: give KEY=VALUE pairs (--value) or the options of the type", exit_code=EXIT_USAGE)
    with api_client() as api:
        status, answer = api.put(f"/api/credentials/{q(name)}/", json={"kind": kind.value, "values": values})
    if json_out:
        echo_json(answer)
        return
    verb = "created" if status == 201 else "updated"
    typer.echo(f"Credential {answer['name']} {verb} ({answer['kind']}: {', '.join(answer['keys'])}).")


@credential_app.command("list")
def credential_list(json_out: bool = JSON_OPTION, format_type: FormatType = FORMAT_OPTION,
                    output: Output = OUTPUT_OPTION) -> None:
    """Your credentials: name, type, key names and when updated (never the values)."""
    with api_client() as api:
        items = list(api.get_all("/api/credentials/"))
    echo_items(items, as_json=wants_json(json_out, format_type, output),
               empty="No credentials. Create one with: osmo credential set NAME --type generic --value KEY=VALUE",
               headers=["NAME", "TYPE", "KEYS", "UPDATED"],
               row=lambda item: (item["name"], item["kind"], ",".join(item["keys"]),
                                 render.fmt_time(item["updated_at"])))


@credential_app.command("delete")
def credential_delete(name: str = typer.Argument(..., help="Credential name.")) -> None:
    """Delete one of your credentials (workflows naming it are refused from then on)."""
    with api_client() as api:
        api.delete(f"/api/credentials/{q(name)}/", not_found=f"credential {name} not found")
    typer.echo(f"Credential {name} deleted.")
