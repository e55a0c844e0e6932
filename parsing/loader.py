"""Safe loading of YAML or JSON documents (text, UTF-8 bytes, or an already-parsed mapping) under limits.

Algorithm:
1. Text over ``DocumentLimits.max_bytes`` (UTF-8) is rejected before parsing; bytes must be UTF-8.
2. YAML goes through :class:`DocumentLoader`, a pure-Python ``SafeLoader`` variant that
   - counts alias uses (``*anchor``) while composing and stops at ``max_aliases``;
   - when ``max_alias_values`` is set, also counts the values each alias use stands for (the values
     under its anchor, nested aliases expanded) and stops once they pass that bound, so an alias bomb
     is refused while its few lines are composed, before anything is built or walked;
   - resolves plain scalars with the YAML 1.2 core schema: only ``true``/``false`` are booleans
     (``on``/``no``/``yes`` stay strings), ``017`` is 17, dates and ``1:30`` stay strings;
   - rejects every tag outside the JSON data model (``!!binary``, ``!!set``, ``!!python/...``,
     custom ``!tags``) and duplicate mapping keys.
   JSON text is YAML, so it takes the same path.
   Text made only of characters where libyaml and PyYAML are known to agree (printable ASCII and
   newlines, without ``! & * % | > @ ` \\ ?``, tabs or document markers; see :func:`_fast_eligible`)
   is parsed by libyaml's C parser under the same resolver and constructor first, ~5x faster; if
   that fails, the pure-Python loader runs and its error is the one reported. A differential test
   (``tests/parsing/test_loader_fast.py``) pins that both give the same value on such text; outside it
   they differ (``"!"``, ``"0\\t"``, ``">#"``), which is why the rest takes the pure-Python loader.
3. The loaded value (or the caller's mapping) is walked once, iteratively: only ``dict`` with
   ``str`` keys, ``list``/``tuple``, ``str``, ``int``, ``float``, ``bool`` and ``None`` are allowed,
   nesting is bounded by ``max_depth`` and the number of values by ``max_nodes`` (which also bounds
   the work on alias-shared or self-referencing structures), text must be storable in a database
   (:func:`storable_text`) and integers at most ``MAX_INT_BITS`` wide.

Every failure is a :class:`~parsing.errors.DocumentInvalidError` listing each problem with its path;
no other exception escapes :func:`load_document`. Messages name the document as the caller asks
(``what="the spec"`` gives "the spec is larger than 1048576 bytes").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader, ReaderError
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from parsing.errors import DocumentInvalidError, PathError, join_path

#: Integers wider than this are far beyond any quantity or duration; Python also refuses to format
#: integers of more than 4300 digits, which would break the error messages.
MAX_INT_BITS = 256
BAD_TEXT_MESSAGE = "text must not contain NUL characters or unpaired surrogates"
BAD_NAME_MESSAGE = "field names must not contain NUL characters or unpaired surrogates"


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """Size limits of one kind of document.

    ``max_nodes`` bounds the values walked after loading (aliases expanded); ``max_alias_values``,
    when set, bounds the values that alias uses stand for while the YAML is composed;
    ``max_yaml_nodes``, when set, bounds the YAML nodes the pure-Python loader composes (mapping keys,
    values and alias uses, each one), so the refusal of a document too large for ``max_nodes`` comes
    while it is composed, not after (composing costs ~20 µs a node: 1 MiB of ``[1,1,...`` is 520,000).
    """

    max_bytes: int
    max_aliases: int
    max_depth: int
    max_nodes: int
    max_alias_values: int | None = None
    max_yaml_nodes: int | None = None


class _LoaderLimitError(yaml.YAMLError):
    pass


class _CoreResolver(BaseResolver):
    """YAML 1.2 core schema resolution of plain scalars (no YAML 1.1 surprises)."""


_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), list("~nN") + [""]
)
_CoreResolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


class _CoreConstructor(SafeConstructor):
    def construct_core_bool(self, node: ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"

    def construct_core_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        try:
            if text.startswith("0o"):
                return int(text[2:], 8)
            if text.startswith("0x"):
                return int(text[2:], 16)
            return int(text, 10)
        except ValueError as exc:  # e.g. more digits than int() converts
            raise ConstructorError(None, None, f"cannot read integer: {exc}", node.start_mark) from exc

    def construct_core_float(self, node: ScalarNode) -> float:
        text = str(self.construct_scalar(node)).lower()
        if text.endswith(".inf"):
            return float("-inf") if text.startswith("-") else float("inf")
        if text.endswith(".nan"):
            return float("nan")
        return float(text)

    def construct_rejected(self, node: Node) -> Any:
        raise ConstructorError(
            None, None, f"tag {node.tag!r} is not allowed; use plain YAML or JSON values", node.start_mark
        )

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            # Checked before merge keys (``<<: *defaults``) are flattened: explicit keys may override merged ones.
            seen: set[Any] = set()
            for key_node, _value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # unhashable key: reported by SafeConstructor below
                if duplicate:
                    if not getattr(self, "keep_last_duplicate", False):
                        raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                    self.duplicate_seen = True  # the last value wins (PyYAML's mapping); located later
        return super().construct_mapping(node, deep=deep)


_CoreConstructor.yaml_constructors = {
    "tag:yaml.org,2002:null": SafeConstructor.construct_yaml_null,
    "tag:yaml.org,2002:bool": _CoreConstructor.construct_core_bool,
    "tag:yaml.org,2002:int": _CoreConstructor.construct_core_int,
    "tag:yaml.org,2002:float": _CoreConstructor.construct_core_float,
    "tag:yaml.org,2002:str": SafeConstructor.construct_yaml_str,
    "tag:yaml.org,2002:seq": SafeConstructor.construct_yaml_seq,
    "tag:yaml.org,2002:map": SafeConstructor.construct_yaml_map,
    None: _CoreConstructor.construct_rejected,
}
_CoreConstructor.yaml_multi_constructors = {}


# PyYAML's peek_event has no type annotations; called through this name it is a typed call.
_peek_event: Callable[[Parser], Any] = Parser.peek_event


class DocumentLoader(Reader, Scanner, Parser, Composer, _CoreConstructor, _CoreResolver):
    """Safe YAML loader: core schema, JSON data model only, bounded alias use and alias expansion."""

    def __init__(self, stream: str, limits: DocumentLimits) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _CoreConstructor.__init__(self)
        _CoreResolver.__init__(self)
        self.max_aliases = limits.max_aliases
        self.max_alias_values = limits.max_alias_values
        self.max_yaml_nodes = limits.max_yaml_nodes
        self.alias_count = 0
        self.yaml_nodes = 0
        # Values composed so far, each alias use counting the values under its anchor; the values
        # under each anchor; the values all alias uses stood for.
        self.composed_values = 0
        self.anchor_values: dict[str, int] = {}
        self.alias_values = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self.yaml_nodes += 1
        if self.max_yaml_nodes is not None and self.yaml_nodes > self.max_yaml_nodes:
            raise _LoaderLimitError(f"too many YAML nodes (more than {self.max_yaml_nodes}, keys included) at "
                                    f"{_position(self._next_event().start_mark)}")
        if self.check_event(yaml.AliasEvent):
            event = self._next_event()
            self.alias_count += 1
            if self.alias_count > self.max_aliases:
                raise _LoaderLimitError(
                    f"too many YAML aliases (more than {self.max_aliases}) at {_position(event.start_mark)}"
                )
            if self.max_alias_values is not None:
                # Values as the walk after loading counts them: mapping keys are not values. An alias
                # to an anchor still being composed (a self-reference) counts 1; that walk bounds those.
                expanded = self.anchor_values.get(event.anchor, 1)
                self.composed_values += expanded
                self.alias_values += expanded
                if self.alias_values > self.max_alias_values:
                    raise _LoaderLimitError(
                        f"YAML aliases expand to more than {self.max_alias_values} values "
                        f"at {_position(event.start_mark)}"
                    )
            return super().compose_node(parent, index)
        if self.max_alias_values is None:
            return super().compose_node(parent, index)
        anchor = self._next_event().anchor
        before = self.composed_values
        if not (isinstance(parent, MappingNode) and index is None):  # a mapping key is no value
            self.composed_values += 1
        node = super().compose_node(parent, index)
        if anchor is not None:
            self.anchor_values[anchor] = self.composed_values - before
        return node

    def _next_event(self) -> Any:
        """The next parser event, not consumed."""
        return _peek_event(self)


def _position(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _yaml_message(exc: yaml.YAMLError) -> str:
    if isinstance(exc, _LoaderLimitError):
        return str(exc)
    if isinstance(exc, ReaderError):
        return f"invalid YAML: character {exc.character!r} at position {exc.position} is not allowed"
    if isinstance(exc, yaml.MarkedYAMLError):
        problem = exc.problem or exc.context or "invalid YAML"
        mark = exc.problem_mark or exc.context_mark
        where = f" at {_position(mark)}" if mark is not None else ""
        return f"invalid YAML: {problem}{where}"
    return f"invalid YAML: {exc}"


def _invalid(path: str, message: str) -> DocumentInvalidError:
    return DocumentInvalidError([PathError(path, message)])


# The characters of text that libyaml parses exactly as PyYAML does (differential fuzzing; see
# _fast_eligible); the ones left out are where they were seen to differ, or hold features (tags,
# anchors, aliases, block scalars, directives, escapes) kept on the path with the limits.
_FAST_CHARS = re.compile("[" + re.escape("".join(
    c for c in map(chr, range(0x20, 0x7F)) if c not in "!&*%|>@`\\?")) + "\n]*")
# Every level of nesting takes one of these; bounding them bounds the C parser's recursion.
_FAST_NESTING = re.compile(r"[\[{:-]")
FAST_MAX_BYTES = 64 * 1024
FAST_MAX_NESTING_MARKS = 2000


def _fast_eligible(text: str) -> bool:
    """Whether ``text`` takes libyaml's parser: short, of :data:`_FAST_CHARS` only, no document
    markers, and few enough nesting marks that the C parser's recursion stays shallow."""
    return (len(text) <= FAST_MAX_BYTES and _FAST_CHARS.fullmatch(text) is not None
            and "---" not in text and "..." not in text
            and len(_FAST_NESTING.findall(text)) <= FAST_MAX_NESTING_MARKS)


_FastLoader: Any = None
if yaml.__with_libyaml__:
    import yaml.cyaml

    _CParser: Any = getattr(yaml.cyaml, "CParser")  # noqa: B009 (not exported in the type stubs)

    class _FastLoader(_CParser, _CoreConstructor, _CoreResolver):  # type: ignore[misc, no-redef]
        """libyaml's parser and composer with the core resolver and the JSON-only constructor."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _CoreConstructor.__init__(self)
            _CoreResolver.__init__(self)


def _construct(loader: Any, duplicates: list[PathError] | None) -> Any:
    """The loader's single document. With ``duplicates`` (a list), a key repeated in one mapping is
    kept with its last value, as OSMO's loader does, and each repetition is added to the list with
    its path and line; without, it is an error."""
    loader.keep_last_duplicate = duplicates is not None
    loader.duplicate_seen = False
    node = loader.get_single_node()
    if node is None:
        return None
    data = loader.construct_document(node)
    if duplicates is not None and loader.duplicate_seen:
        duplicates.extend(duplicate_keys(node))
    return data


def duplicate_keys(root: Node) -> list[PathError]:
    """Every key of ``root``'s mappings that repeats an earlier key of its mapping, with its path
    (the mapping's path + the key) and a message naming both lines."""
    found: list[PathError] = []
    stack: list[tuple[Node, str]] = [(root, "")]
    seen_nodes: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:  # an alias: already walked
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first_line: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, ScalarNode) else None
                if not isinstance(key, str):
                    continue
                line = key_node.start_mark.line + 1
                if key in first_line:
                    found.append(PathError(join_path(path, key), f"duplicate key {key!r} at line {line} (first at "
                                           f"line {first_line[key]}): the last value is kept"))
                else:
                    first_line[key] = line
                stack.append((value_node, join_path(path, key)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, join_path(path, index)) for index, item in enumerate(node.value))
    return sorted(found, key=PathError.sort_key)


def _fast_load(text: str, duplicates: list[PathError] | None = None) -> Any:
    """The document by libyaml, or raises YAMLError (the caller then asks the pure-Python loader)."""
    loader = _FastLoader(text)
    try:
        return _construct(loader, duplicates)
    finally:
        loader.dispose()


def _load_text(text: str, limits: DocumentLimits, what: str, duplicates: list[PathError] | None = None) -> Any:
    if _FastLoader is not None and _fast_eligible(text):
        try:
            if duplicates is None:
                return _fast_load(text)
            found: list[PathError] = []  # kept only if libyaml reads the whole text
            data = _fast_load(text, found)
            duplicates.extend(found)
            return data
        except yaml.YAMLError:
            pass  # the pure-Python loader below says what is wrong, in its words
    loader: DocumentLoader | None = None
    try:
        loader = DocumentLoader(text, limits)  # the reader rejects control characters right here
        return _construct(loader, duplicates)
    except yaml.YAMLError as exc:
        raise _invalid("", _yaml_message(exc)) from None
    except RecursionError:
        raise _invalid("", f"{what} is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def storable_text(text: str) -> bool:
    """False for text a database cannot store: NUL characters (PostgreSQL text and jsonb refuse
    them) or unpaired surrogates (not encodable as UTF-8)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_plain(document: Any, limits: DocumentLimits, what: str) -> None:
    """Walk ``document`` iteratively; allow JSON-like values only, bounded depth and size, text a
    database can store and integers of sane size."""
    errors: list[PathError] = []
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    count = 0
    while stack:
        value, path, depth = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise _invalid("", f"{what} is too large (more than {limits.max_nodes} values)")
        if depth > limits.max_depth:
            raise _invalid(path, f"{what} is nested too deeply (more than {limits.max_depth})")
        if isinstance(value, Mapping | list | tuple) and count + len(stack) + len(value) > limits.max_nodes:
            # every value on the stack is counted when it is taken: refuse before making the paths of a
            # list of 800,000 values (1.5 s), not after
            raise _invalid("", f"{what} is too large (more than {limits.max_nodes} values)")
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    errors.append(PathError(join_path(path, repr(key)), "field names must be strings"))
                    continue
                if not storable_text(key):
                    errors.append(PathError(join_path(path, key.encode("utf-8", "replace").decode()), BAD_NAME_MESSAGE))
                    continue
                stack.append((item, join_path(path, key), depth + 1))
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                stack.append((item, join_path(path, index), depth + 1))
        elif isinstance(value, str):
            if not storable_text(value):
                errors.append(PathError(path, BAD_TEXT_MESSAGE))
        elif isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_INT_BITS:
                errors.append(PathError(path, "the number is too large"))
        elif value is not None and not isinstance(value, bool | float):
            errors.append(PathError(path, f"unsupported value of type {type(value).__name__}"))
    if errors:
        raise DocumentInvalidError(errors)


def load_document(
    source: object, limits: DocumentLimits, *, what: str = "the document", shape: str = "a mapping",
    duplicates: list[PathError] | None = None,
) -> dict[str, Any]:
    """Load a document from YAML/JSON text (``str`` or UTF-8 ``bytes``) or a mapping, within ``limits``.

    Returns the top-level mapping (not yet validated against the document's schema). ``what`` names
    the document in messages ("the spec"); ``shape`` says what the top level must be ("a mapping with
    a 'workflow' key"). A key repeated in a mapping is an error, unless ``duplicates`` is given: then
    the last value is kept and a warning per repetition is added to it (see :func:`_construct`).

    Raises:
        DocumentInvalidError: unreadable, unsafe, too large, or not a mapping.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        raw = bytes(source)
        if len(raw) > limits.max_bytes:
            raise _invalid("", f"{what} is larger than {limits.max_bytes} bytes")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _invalid("", f"{what} is not valid UTF-8 (byte {exc.start})") from None
        document = _load_text(text, limits, what, duplicates)
    elif isinstance(source, str):
        try:
            size = len(source.encode("utf-8"))
        except UnicodeEncodeError:
            raise _invalid("", f"{what} contains invalid characters (lone surrogates)") from None
        if size > limits.max_bytes:
            raise _invalid("", f"{what} is larger than {limits.max_bytes} bytes")
        document = _load_text(source, limits, what, duplicates)
    elif isinstance(source, Mapping):
        document = source
    else:
        raise _invalid("", f"{what} must be YAML or JSON text, or a mapping")
    if document is None:
        raise _invalid("", f"{what} is empty")
    if not isinstance(document, Mapping):
        raise _invalid("", f"{what} must be {shape}")
    _check_plain(document, limits, what)
    return dict(document)
