"""``osmo workflow tag``: the tags an admin defined, put on and taken off workflows (OSMO's command).
Registered on the workflow app of :mod:`cli.main`."""

from __future__ import annotations

import typer

from cli.api import workflow_path
from cli.errors import EXIT_USAGE, ApiError, CliError, one_line
from cli.main import FORMAT_OPTION, JSON_OPTION, FormatType, api_client, wants_json, workflow_app
from cli.output import echo_json
from cli.spread import TagValuesCommand


@workflow_app.command("tag", cls=TagValuesCommand)
def workflow_tag(
    workflows: list[str] = typer.Option(None, "--workflow", "-w", metavar="ID",
                                        help="Workflows to change (several: -w a-1 b-2). Without it: the tags "
                                        "you may assign."),
    add: list[str] = typer.Option(None, "--add", "-a", metavar="TAG", help="Tags to add."),
    remove: list[str] = typer.Option(None, "--remove", "-r", metavar="TAG", help="Tags to remove (before adding)."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """List the tags you may assign, or add and remove tags of workflows (remove first, then add).

    Each workflow is changed on its own: one that cannot be (not found, an unknown tag) is said on stderr,
    the others still are, and the exit code is then non-zero. An unknown tag changes nothing of that
    workflow."""
    as_json = wants_json(json_out, format_type)
    if (add or remove) and not workflows:
        raise CliError("no workflow given to add or remove tags on: pass --workflow ID", exit_code=EXIT_USAGE)
    if workflows and not (add or remove):
        raise CliError("no tags given: pass --add TAG and/or --remove TAG", exit_code=EXIT_USAGE)
    with api_client() as api:
        if not workflows:
            answer = api.get("/api/tags/")
            if as_json:
                echo_json(answer)
                return
            names = answer.get("tags") or []
            if not names:
                typer.echo("No tags have been set by admins.")
                return
            descriptions = {item.get("name"): item.get("description") for item in answer.get("details") or []}
            typer.echo("Tags:")
            for name in names:
                typer.echo(f"- {name}{': ' + descriptions[name] if descriptions.get(name) else ''}")
            return
        failed = 0
        answers = []
        for workflow_id in workflows:
            try:
                _status, answer = api.post(workflow_path(workflow_id, "tag/"),
                                           json={"add": list(add or []), "remove": list(remove or [])},
                                           not_found=f"workflow {workflow_id} not found")
            except ApiError as exc:
                failed = max(failed, exc.exit_code)
                for line in one_line(exc).lines():
                    typer.echo(line, err=True)
                continue
            answers.append(answer)
            if not as_json:
                tags = ", ".join(answer.get("tags") or []) or "none"
                typer.echo(f"Workflow {answer.get('workflow', workflow_id)} updated: tags {tags}.")
    if as_json and answers:
        echo_json(answers[0] if len(workflows) == 1 else answers)
    if failed:
        raise typer.Exit(failed)
