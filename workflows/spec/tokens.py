"""OSMO's run-time tokens (docs/spec.md, "Tokens"): text the service fills in when a task's pod is
built, not when the spec is rendered. Pure: stdlib only.

The tokens OSMO documents, written inside double braces (spaces allowed around the content):

- ``{{output}}``: the task's output directory (uploaded to its ``outputs`` when it finishes);
- ``{{input:<n>}}``: the directory of the task's ``n``-th input (0-based, in ``inputs`` order);
- ``{{input:<task>}}``: the directory of the input of upstream task ``<task>`` (the task must be
  one of this task's ``task:`` inputs);
- ``{{workflow_id}}``: the workflow's id (``<name>-<n>``);
- ``{{host:<task>}}``: the host name of task ``<task>`` of the workflow. A task of another group
  resolves only while that task runs, as in OSMO.

Three steps use this module:

1. Rendering (:mod:`workflows.spec.template`): :func:`protect_tokens` turns each token into a Jinja
   expression that prints the token itself, so the rendered text holds it unchanged (canonical
   form, no inner spaces) instead of Jinja reading ``output`` as an undefined variable or failing
   on the ``:``. Line numbers are kept.
2. Validation (:mod:`workflows.spec.parser`): :func:`find_tokens` lists the tokens of a text, and
   :func:`malformed_tokens` the ``{{input:...}}``/``{{host:...}}`` that are not well formed.
3. Dispatch: :func:`resolve_tokens` replaces every token of a text with its value from a
   :class:`TokenContext`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_NAME = r"[A-Za-z0-9_-]+"
#: A token, as written: ``{{ output }}``, ``{{input:0}}``, ``{{host:master}}`` ...
TOKEN = re.compile(r"\{\{\s*(output|workflow_id|input:" + _NAME + r"|host:" + _NAME + r")\s*\}\}")
#: What looks like an ``input:``/``host:`` token, well formed or not.
TOKEN_LIKE = re.compile(r"\{\{\s*(input|host)\s*:([^{}\n]*)\}\}")
_PROTECTED = re.compile(TOKEN.pattern + "|" + TOKEN_LIKE.pattern)
TOKEN_NAMES = ("output", "workflow_id", "input:<n>", "input:<task>", "host:<task>")


@dataclass(frozen=True, slots=True)
class Token:
    """One token found in a text: ``kind`` is ``output``, ``workflow_id``, ``input`` or ``host``;
    ``arg`` the index (``input`` by position: an int), the task name, or None."""

    kind: str
    arg: int | str | None
    text: str  # canonical form, e.g. "{{host:master}}"

    @classmethod
    def from_content(cls, content: str) -> Token:
        kind, _sep, arg = content.partition(":")
        if kind == "input" and arg.isdigit():
            return cls(kind, int(arg), f"{{{{{content}}}}}")
        return cls(kind, arg or None, f"{{{{{content}}}}}")


def find_tokens(text: str) -> list[Token]:
    """The tokens of ``text``, in order of appearance (repeats included)."""
    return [Token.from_content(match.group(1)) for match in TOKEN.finditer(text)]


def malformed_tokens(text: str) -> list[str]:
    """The ``{{input:...}}`` and ``{{host:...}}`` of ``text`` that are not well formed (an empty or
    spaced name, ``{{input:-1}}``)."""
    return [match.group(0) for match in TOKEN_LIKE.finditer(text) if not TOKEN.fullmatch(match.group(0))]


def _protected(match: re.Match[str]) -> str:
    token = TOKEN.fullmatch(match.group(0))
    if token is not None:
        return "{{ '{{" + token.group(1) + "}}' }}"
    # malformed: kept as written, for the parser to name by path
    return "{{ " + json.dumps(match.group(0), ensure_ascii=False) + " }}"


def protect_tokens(text: str) -> str:
    """``text`` with every token replaced by a Jinja expression printing its canonical form, so that
    rendering the template leaves the tokens in place (the line structure is unchanged). Malformed
    ``{{input:...}}``/``{{host:...}}`` are kept as written, so that the parser reports them by path."""
    return _PROTECTED.sub(_protected, text)


class TokenUnresolvedError(LookupError):
    """A token's value is missing from the context (e.g. the host of a task that is not running)."""

    def __init__(self, token: str, reason: str) -> None:
        super().__init__(f"{token}: {reason}")
        self.token = token
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TokenContext:
    """The values of one task's tokens at dispatch.

    ``inputs`` are the input directories in the task's ``inputs`` order; ``input_tasks`` maps an
    upstream task name to its input directory; ``hosts`` maps task names to host names (only the
    tasks that can be reached now: the task's own group and running tasks of other groups)."""

    workflow_id: str
    output: str = ""
    inputs: Sequence[str] = ()
    input_tasks: Mapping[str, str] = field(default_factory=dict)
    hosts: Mapping[str, str] = field(default_factory=dict)


def _value(token: Token, context: TokenContext) -> str:
    if token.kind == "workflow_id":
        return context.workflow_id
    if token.kind == "output":
        return context.output
    if token.kind == "input":
        if isinstance(token.arg, int):
            if token.arg >= len(context.inputs):
                raise TokenUnresolvedError(token.text, f"the task has {len(context.inputs)} inputs")
            return context.inputs[token.arg]
        if token.arg not in context.input_tasks:
            raise TokenUnresolvedError(token.text, f"{token.arg!r} is not an input task of this task")
        return context.input_tasks[str(token.arg)]
    if token.arg not in context.hosts:
        raise TokenUnresolvedError(token.text, f"task {token.arg!r} has no host now (it is not running)")
    return context.hosts[str(token.arg)]


def resolve_tokens(text: str, context: TokenContext) -> str:
    """``text`` with every token replaced by its value in ``context``. Text outside tokens is
    unchanged. Raises :class:`TokenUnresolvedError` for a token whose value the context lacks."""
    return TOKEN.sub(lambda match: _value(Token.from_content(match.group(1)), context), text)
