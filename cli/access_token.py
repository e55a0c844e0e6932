"""``osmo token set | list | delete``: the user's personal access tokens (docs/cli.md "Access tokens"),
over ``/api/tokens/``, as OSMO's ``osmo token``. A token's key is printed once, when it is made.
Registered on the app of :mod:`cli.main`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import typer

from cli.api import q
from cli.main import FORMAT_OPTION, JSON_OPTION, OUTPUT_OPTION, FormatType, Output, api_client, app, wants_json
from cli.output import echo_items, echo_json


def last_day(expires_at: str) -> str:
    """The last day (UTC) a token whose ``expires_at`` is this moment works: the day before it ends."""
    try:
        moment = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return expires_at
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment.astimezone(UTC) - timedelta(microseconds=1)).date().isoformat()


token_app = typer.Typer(help="Your personal access tokens: named API tokens with an expiry, for scripts and CI.",
                        no_args_is_help=True)
app.add_typer(token_app, name="token")


@token_app.command("set")
def token_set(
    name: str = typer.Argument(..., help="Token name (letters, digits, '_', '-', '.')."),
    expires_at: str = typer.Option(None, "--expires-at", "-e",
                                   help="Last day it works (UTC), YYYY-MM-DD. Default: 31 days from today."),
    description: str = typer.Option(None, "--description", "-d", help="What it is for."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Make an access token. Its key is shown this once: keep it in a secret store."""
    body = {"name": name, **({"expires_at": expires_at} if expires_at else {}),
            **({"description": description} if description else {})}
    with api_client() as api:
        _status, answer = api.post("/api/tokens/", json=body)
    if wants_json(json_out, format_type, None):
        echo_json(answer)
        return
    typer.echo("Note: Save the token in a secure location as it will not be shown again", err=True)
    typer.echo(f"Access token: {answer['token']}")
    typer.echo(f"Token {answer['name']} works through {last_day(answer['expires_at'])} (UTC); use it as "
               "OSMO_TOKEN or with osmo login --token.", err=True)


@token_app.command("list")
def token_list(json_out: bool = JSON_OPTION, format_type: FormatType = FORMAT_OPTION,
               output: Output = OUTPUT_OPTION) -> None:
    """Your access tokens: name, expiry, description (never the keys)."""
    with api_client() as api:
        items = list(api.get_all("/api/tokens/"))
    echo_items(items, as_json=wants_json(json_out, format_type, output),
               empty="No access tokens. Make one with: osmo token set NAME --expires-at YYYY-MM-DD",
               headers=["NAME", "LAST DAY (UTC)", "STATUS", "DESCRIPTION"],
               row=lambda item: (item["name"], last_day(item["expires_at"]),
                                 "expired" if item["expired"] else "active", item["description"]))


@token_app.command("delete")
def token_delete(name: str = typer.Argument(..., help="Token name.")) -> None:
    """Delete one of your access tokens: its key stops working at once."""
    with api_client() as api:
        api.delete(f"/api/tokens/{q(name)}/", not_found=f"access token {name} not found")
    typer.echo(f"Token {name} deleted.")
