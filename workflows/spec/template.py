"""Workflow specs as Jinja templates (docs/design.md §11), rendered in a sandbox. Pure: Jinja2, PyYAML, stdlib.

A spec is a template when its text has ``{{`` or ``{%`` or when values are given at submission.
Algorithm of :func:`render_spec`:
1. Take the top-level ``default-values:`` block out of the text line by line (the whole document
   is not YAML before it is rendered) and load it alone; its values may be any YAML value
   (mappings and lists too, as in OSMO), but no template code.
2. Merge: ``default-values``, then the submission's values (``--set``, ``--set-string``) on top.
3. Protect OSMO's run-time tokens (:func:`workflows.spec.tokens.protect_tokens`), then render with
   :class:`SpecSandbox` (``jinja2.sandbox``) and ``StrictUndefined``: a name used but never given is
   an error, not an empty string. Every error carries its template line.
4. Apply ``--set-env`` values to every task's ``environment`` (then the text is the YAML dump of the
   rendered document, comments dropped).

Bounds, so that a template cannot exhaust the service: loop iterations and calls (macros included)
share one step budget; ``range`` is capped; ``*``, ``**``, ``+``, ``%`` and ``~`` check the size of
their result before computing it; filters are a safe subset (``join``, ``replace``, ``indent``
checked), string methods a non-growing subset; recursive loops and ``namespace`` are not offered;
the output is cut at ``max_output`` characters. With ``TemplateLimits.process`` set, the rendering
runs in a child process bounded by the operating system as well (memory, CPU and wall-clock time:
:mod:`workflows.spec.isolation`), so what these checks miss cannot exhaust the calling process.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError, nodes
from jinja2.sandbox import SandboxedEnvironment
from jinja2.visitor import NodeTransformer

from workflows.spec.errors import SpecError, SpecInvalidError, join_path
from workflows.spec.isolation import ProcessLimitError, ProcessLimits, run_isolated
from workflows.spec.loader import SpecLimits, load_document
from workflows.spec.model import ScalarValue
from workflows.spec.tokens import protect_tokens

TEMPLATE_PATH = "template"
VALUES_PATH = "default-values"
VALUE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
MARKERS = ("{{", "{%")
_DEFAULTS_LINE = re.compile(r"^default-values\s*:(.*)$")
_LOOP = "osmo__loop"
_CONCAT = "osmo__concat"
SAFE_FILTERS = (
    "abs", "batch", "capitalize", "count", "d", "default", "dictsort", "first", "float", "int", "items", "last",
    "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "reverse", "round", "select",
    "selectattr", "slice", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount",
)
SAFE_STR_METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
    "title", "capitalize", "isdigit", "isalpha", "isalnum", "count", "find", "rfind", "removeprefix", "removesuffix",
})
MAX_INDENT = 64
MAX_POWER_BITS = 4096


@dataclass(frozen=True, slots=True)
class TemplateLimits:
    """Bounds of one rendering: output characters, steps (loop iterations + calls), ``range`` length,
    the length of one submitted value (``set`` and ``set_env``) and their number (of each), and the
    operating-system limits of the process that renders
    (None: render in the calling process)."""

    max_output: int = 1024 * 1024
    max_steps: int = 100_000
    max_range: int = 10_000
    max_value_length: int = 4096
    max_values: int = 256
    process: ProcessLimits | None = None


@dataclass(frozen=True, slots=True)
class RenderedSpec:
    """The rendered spec text and the values it was rendered with (``default-values`` overridden by
    the submission's); ``values`` and ``env`` are empty when the spec was not a template. ``warnings``:
    the keys repeated in the rendered spec when ``env`` was applied (the text is then a YAML dump, which
    has none left for the parser to say); ``before_env``: the rendered text before ``env`` was applied
    (its lines follow the template's: :mod:`workflows.spec.template_lines`), ``text`` without ``env``."""

    text: str
    values: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    warnings: tuple[SpecError, ...] = ()
    before_env: str | None = None


class TemplateLimitError(TemplateError):
    """The template went past one of :class:`TemplateLimits`."""


def cast_value(text: str) -> ScalarValue:
    """``--set`` casting: an int or a float when the text is one, else the text unchanged."""
    stripped = text.strip()
    if re.fullmatch(r"[-+]?\d+", stripped):
        return int(stripped)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", stripped):
        return float(stripped)
    return text


def parse_assignments(items: Iterable[str], *, cast: bool, path: str) -> dict[str, ScalarValue]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}`` (values cast with :func:`cast_value` when ``cast``).
    Raises :class:`SpecInvalidError` naming every item without ``=``."""
    values: dict[str, ScalarValue] = {}
    errors = []
    for index, item in enumerate(items):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            errors.append(SpecError(join_path(path, index), f"expected NAME=VALUE, got {item[:80]!r}"))
            continue
        values[name.strip()] = cast_value(value) if cast else value
    if errors:
        raise SpecInvalidError(errors)
    return values


def is_template(text: str) -> bool:
    return any(marker in text for marker in MARKERS)


class _Bounded(NodeTransformer):
    """Routes every ``for`` loop through the step budget and every ``~`` through the size check;
    refuses recursive loops (their depth is not bounded by the template's text)."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:
            raise TemplateSyntaxError("recursive loops are not supported in workflow specs", node.lineno)
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.Name(_LOOP, "load", lineno=node.lineno), [node.iter], [], None, None,
                               lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.Name(_CONCAT, "load", lineno=node.lineno), list(node.nodes), [], None, None,
                          lineno=node.lineno)


def _size(value: object) -> int:
    return len(value) if isinstance(value, str | list | tuple | dict) else 0


class SpecSandbox(SandboxedEnvironment):
    """Jinja's sandbox with the bounds of the module docstring. One instance per rendering: it
    counts that rendering's steps."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, limits: TemplateLimits) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, trim_blocks=True,
                         lstrip_blocks=True)
        self.limits = limits
        self.steps = 0
        self.filters = {name: self.filters[name] for name in SAFE_FILTERS}
        self.filters["join"] = self._join
        self.filters["replace"] = self._replace
        self.filters["indent"] = self._indent
        self.globals = {"range": self._range, "dict": dict, _LOOP: self._loop, _CONCAT: self._concat}

    # -- budgets ---------------------------------------------------------------------------------
    def step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > self.limits.max_steps:
            raise TemplateLimitError(f"the template takes more than {self.limits.max_steps} steps "
                                     "(loop iterations and calls)")

    def check_size(self, size: int) -> None:
        if size > self.limits.max_output:
            raise TemplateLimitError(f"a value of the template grows past {self.limits.max_output} characters")

    def _loop(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.step()
            yield item

    def _range(self, *args: int) -> range:
        values = range(*args)
        if len(values) > self.limits.max_range:
            raise TemplateLimitError(f"range() of {len(values)} items; at most {self.limits.max_range}")
        return values

    def _concat(self, *parts: Any) -> str:
        texts = [str(part) for part in parts]
        self.check_size(sum(map(len, texts)))
        return "".join(texts)

    # -- checked operations ----------------------------------------------------------------------
    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        if operator_name == "*":
            for value, times in ((left, right), (right, left)):
                if _size(value) and isinstance(times, int):
                    self.check_size(_size(value) * max(times, 0))
            return operator.mul(left, right)
        if operator_name == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                if max(left.bit_length(), 1) * right > MAX_POWER_BITS:
                    raise TemplateLimitError(f"{left} ** {right} is too large")
            return operator.pow(left, right)
        if operator_name == "+":
            self.check_size(_size(left) + _size(right))
            return operator.add(left, right)
        if isinstance(left, str):
            raise TemplateLimitError("'%' formatting of text is not supported; join text with '~'")
        return operator.mod(left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.step()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str) and getattr(__obj, "__name__", "") not in SAFE_STR_METHODS:
            raise TemplateLimitError(f"the text method {getattr(__obj, '__name__', '?')}() is not supported")
        return SandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)

    def _join(self, value: Iterable[Any], separator: str = "", attribute: Any = None) -> str:
        items = [str(item[attribute] if attribute is not None else item) for item in value]
        self.check_size(sum(map(len, items)) + len(separator) * max(len(items) - 1, 0))
        return separator.join(items)

    def _replace(self, value: Any, old: str, new: str, count: int | None = None) -> str:
        text = str(value)
        hits = text.count(old) if old else len(text) + 1
        if count is not None and count >= 0:
            hits = min(hits, count)
        self.check_size(len(text) + hits * max(len(str(new)) - len(old), 0))
        return text.replace(old, str(new), -1 if count is None else count)

    def _indent(self, value: Any, width: int = 4, first: bool = False, blank: bool = False) -> str:
        if not isinstance(width, int) or not 0 <= width <= MAX_INDENT:
            raise TemplateLimitError(f"indent width must be between 0 and {MAX_INDENT}")
        text = str(value)
        self.check_size(len(text) + width * (text.count("\n") + 1))
        pad = " " * width
        lines = text.split("\n")
        out = [(pad + line if (blank or line.strip()) else line) for line in lines[1:]]
        head = pad + lines[0] if first else lines[0]
        return "\n".join([head, *out])


def _template_line(exc: BaseException) -> int | None:
    """The template line of an error: Jinja rewrites tracebacks to name the template's lines."""
    if isinstance(exc, TemplateSyntaxError):
        return exc.lineno
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _template_error(exc: BaseException) -> SpecInvalidError:
    line = _template_line(exc)
    if isinstance(exc, TemplateSyntaxError):
        message = exc.message or "syntax error"
    elif isinstance(exc, TemplateError):
        message = str(exc)
    else:
        message = f"{exc.__class__.__name__}: {exc}"
    if isinstance(exc, RecursionError):
        message = "the template calls itself too deeply"
    where = f"line {line}: " if line else ""
    return SpecInvalidError([SpecError(TEMPLATE_PATH, f"{where}{message}")])


_INLINE_TAG = re.compile(r"(?m)^([ \t]+)\{%(?![-+])([^\n]*?)%\}(?=[ \t]*[^ \t\n])")


def keep_inline_indentation(text: str) -> str:
    """A block tag that starts an indented line and shares it with text keeps the indentation
    (``{%+``): ``lstrip_blocks`` is meant for tags alone on their line, and stripping here would
    move the text to column 0 (OSMO's cookbook writes ``{% raw %}{{host:...}}{% endraw %}`` so)."""
    return _INLINE_TAG.sub(lambda match: f"{match.group(1)}{{%+{match.group(2)}%}}", text)


def split_default_values(text: str) -> str | None:
    """The top-level ``default-values:`` block of ``text`` (its key line and the indented or
    comment lines after it), or None."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _DEFAULTS_LINE.match(line):
            block = [line]
            for follower in lines[index + 1:]:
                if follower and not follower[0].isspace() and not follower.startswith("#"):
                    break
                block.append(follower)
            return "\n".join(block)
    return None


def default_values(text: str, limits: SpecLimits) -> dict[str, Any]:
    """The spec's ``default-values`` as a mapping of names to YAML values (errors under ``default-values``)."""
    block = split_default_values(text)
    if block is None:
        return {}
    if is_template(block):
        raise SpecInvalidError([SpecError(VALUES_PATH, "default-values must be plain values, not template code")])
    document = load_document(block, limits)
    raw = document.get("default-values")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecInvalidError([SpecError(VALUES_PATH, "must be a mapping of names to values")])
    return dict(raw)


def check_values(values: Mapping[str, Any], *, path: str, limits: TemplateLimits,
                 scalars: bool = True) -> list[SpecError]:
    """Value names (and, with ``scalars``, values: submitted ones are scalars; ``default-values``
    may hold any YAML value, as in OSMO)."""
    errors = []
    for name, value in values.items():
        where = join_path(path, name)
        if not VALUE_NAME.fullmatch(name):
            errors.append(SpecError(where, f"invalid value name {name[:80]!r}: use letters, digits and '_', "
                                           "starting with a letter"))
        elif not scalars:
            continue
        elif value is not None and not isinstance(value, str | int | float | bool):
            errors.append(SpecError(where, "must be a string, number or boolean"))
        elif isinstance(value, str) and len(value) > limits.max_value_length:
            errors.append(SpecError(where, f"longer than {limits.max_value_length} characters"))
    return errors


def check_env(env: Mapping[str, str], *, limits: TemplateLimits) -> list[SpecError]:
    """``set_env``: how many, their names, and the length of each value (the bounds of ``set``)."""
    if len(env) > limits.max_values:
        return [SpecError("set_env", f"{len(env)} environment variables; at most {limits.max_values}")]
    errors = []
    for name, value in env.items():
        if not ENV_NAME.fullmatch(name):
            errors.append(SpecError(join_path("set_env", name), f"invalid environment variable name {name[:80]!r}"))
        elif len(value) > limits.max_value_length:
            errors.append(SpecError(join_path("set_env", name), f"longer than {limits.max_value_length} characters"))
    return errors


def _env_tasks(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The tasks ``set_env`` goes to (of ``workflow.groups`` or ``workflow.tasks``; anything not
    shaped like a task is left for the parser to report)."""
    body = document.get("workflow")
    if not isinstance(body, dict):
        return []
    tasks: list[Any] = []
    if isinstance(body.get("tasks"), list):
        tasks.extend(body["tasks"])
    for group in body.get("groups") or [] if isinstance(body.get("groups"), list) else []:
        if isinstance(group, dict) and isinstance(group.get("tasks"), list):
            tasks.extend(group["tasks"])
    return [task for task in tasks if isinstance(task, dict) and isinstance(task.get("environment") or {}, dict)]


def apply_env(document: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Every task's ``environment`` with ``env`` set on top."""
    for task in _env_tasks(document):
        task["environment"] = {**(task.get("environment") or {}), **env}
    return document


def _env_fits(document: dict[str, Any], env: Mapping[str, str], text: str, max_bytes: int) -> None:
    """Refuse ``env`` before it is dumped when it alone makes the spec too large: each task gets every
    variable, at least ``NAME: value`` on a line (a dump never writes less), so 1 MB of variables on
    100 tasks was a 100 MB dump (40 s of CPU) before the size check after it refused the spec."""
    per_task = sum(len(name.encode()) + len(value.encode()) + 3 for name, value in env.items())
    tasks = len(_env_tasks(document))
    if len(text.encode()) + tasks * per_task > max_bytes:
        raise SpecInvalidError([SpecError("set_env", f"{len(env)} environment variables of {per_task} bytes on each "
                                                     f"of {tasks} tasks make the spec larger than {max_bytes} bytes")])


def render_spec(
    text: str,
    *,
    values: Mapping[str, ScalarValue] | None = None,
    env: Mapping[str, str] | None = None,
    dump: Callable[[dict[str, Any]], str] | None = None,
    limits: TemplateLimits | None = None,
    spec_limits: SpecLimits | None = None,
) -> RenderedSpec:
    """Render ``text`` with its ``default-values`` overridden by ``values``, then apply ``env``.

    ``dump`` writes a document back to YAML (needed only with ``env``). Raises
    :class:`SpecInvalidError` (paths ``template``, ``default-values``, ``set``, ``set_env``).
    """
    limits = limits or TemplateLimits()
    spec_limits = spec_limits or SpecLimits()
    # A file saved as "UTF-8 with BOM": the mark would hide a first line's `default-values:`.
    text = text.removeprefix("\ufeff")
    values = dict(values or {})
    env = dict(env or {})
    errors = check_values(values, path="set", limits=limits)
    if len(values) > limits.max_values:
        errors = [SpecError("set", f"{len(values)} values; at most {limits.max_values}")]
    errors += check_env(env, limits=limits)
    if errors:
        raise SpecInvalidError(errors)
    merged: dict[str, Any] = {}
    rendered = text
    if values or is_template(text):
        merged = default_values(text, spec_limits)
        bad = check_values(merged, path=VALUES_PATH, limits=limits, scalars=False)
        if bad:
            raise SpecInvalidError(bad)
        merged.update(values)
        # OSMO's run-time tokens ({{output}}, {{host:master}} ...) pass through rendering unchanged
        rendered = _render_bounded(keep_inline_indentation(protect_tokens(text)), merged, limits)
    warnings: list[SpecError] = []
    before_env = rendered
    if env:
        if dump is None:
            raise ValueError("render_spec needs dump= to apply env")
        # A repeated key keeps its last value, as the parser does without env (OSMO's loader does so).
        document = load_document(rendered, spec_limits, warnings)
        _env_fits(document, env, rendered, spec_limits.max_bytes)
        rendered = dump(apply_env(document, env))
    return RenderedSpec(text=rendered, values=merged, env=env, warnings=tuple(warnings), before_env=before_env)


def render_text(text: str, values: Mapping[str, Any], limits: TemplateLimits) -> str:
    """Render ``text`` as it is (run-time tokens protected already) with ``values``, bounded as
    :func:`render_spec` renders (:mod:`workflows.spec.template_lines` renders a marked copy)."""
    return _render_bounded(text, dict(values), limits)


def _render_bounded(text: str, values: dict[str, ScalarValue], limits: TemplateLimits) -> str:
    """:func:`_render`, in a child process under ``limits.process`` when set."""
    if limits.process is None:
        try:
            return _render(text, values, limits)
        except MemoryError as exc:
            raise _template_error(exc) from None
    try:
        kind, result = run_isolated(_render_outcome, (text, values, limits), limits.process)
    except ProcessLimitError as exc:
        raise SpecInvalidError([SpecError(TEMPLATE_PATH, f"the template's rendering {exc.message}")]) from None
    if kind == "invalid":
        raise SpecInvalidError([SpecError(path, message) for path, message in result])
    return str(result)


def _render_outcome(text: str, values: dict[str, ScalarValue], limits: TemplateLimits) -> tuple[str, Any]:
    """:func:`_render` as a value that crosses a process boundary: ``("text", str)`` or ``("invalid",
    [(path, message)])``."""
    try:
        return ("text", _render(text, values, limits))
    except SpecInvalidError as exc:
        return ("invalid", [(error.path, error.message) for error in exc.errors])


def _render(text: str, values: Mapping[str, ScalarValue], limits: TemplateLimits) -> str:
    sandbox = SpecSandbox(limits)
    try:
        tree = _Bounded().visit(sandbox.parse(text))
        template = sandbox.from_string(tree)
        chunks: list[str] = []
        size = 0
        for chunk in template.generate(**values):
            size += len(chunk)
            if size > limits.max_output:
                raise TemplateLimitError(f"the rendered spec is longer than {limits.max_output} characters")
            chunks.append(chunk)
    except (SpecInvalidError, MemoryError):
        raise  # MemoryError: past the process's memory limit (reported as such by workflows.spec.isolation)
    except Exception as exc:  # the template is the user's code: any failure is theirs to fix
        raise _template_error(exc) from None
    return "".join(chunks)
