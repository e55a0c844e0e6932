"""Forms of the status pages: the workflow list filters and the submit page."""

from __future__ import annotations

import json
import re
from typing import Any, cast

import yaml
from django import forms

from parsing.loader import DocumentLimits, DocumentLoader
from workflows.choices import Priority, WorkflowStatus

# The spec's own limit (workflows.spec.loader.SpecLimits.max_bytes, docs/spec.md "Limits"), so a file the API
# takes is taken here too; tests/pages/test_pages.py uploads one byte under and over it.
MAX_UPLOAD_BYTES = 1024 * 1024

STATUS_FILTER_CHOICES = [
    ("", "any status"),
    ("ACTIVE", "active (pending or running)"),
    ("FAILED", "failed (any)"),
    *[(status.value, status.value) for status in WorkflowStatus],
]


class WorkflowFilterForm(forms.Form):
    status = forms.ChoiceField(choices=STATUS_FILTER_CHOICES, required=False)
    pool = forms.ChoiceField(choices=[("", "any pool")], required=False)
    user = forms.CharField(required=False, max_length=150, widget=forms.TextInput(attrs={"placeholder": "username"}))
    name = forms.CharField(required=False, max_length=100, widget=forms.TextInput(attrs={"placeholder": "name or id"}))
    sort = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, pool_names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pool = cast(forms.ChoiceField, self.fields["pool"])
        pool.choices = [("", "any pool"), *[(name, name) for name in pool_names]]

    def value(self, name: str) -> str:
        return (self.cleaned_data.get(name) or "") if self.is_valid() else ""


class WorkflowSubmitForm(forms.Form):
    spec = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false", "placeholder": "workflow:\n  name: ..."}),
        help_text="Paste the workflow YAML, or upload a file below.",
    )
    spec_file = forms.FileField(required=False, label="or upload a YAML file")
    pool = forms.ChoiceField(choices=[])
    priority = forms.ChoiceField(choices=Priority.choices, initial=Priority.NORMAL, required=False)

    def __init__(self, *args: Any, pool_names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["pool"]).choices = [(name, name) for name in pool_names]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("spec_file")
        if upload is not None:
            if upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES} bytes, the limit of a spec.")
            try:
                data["spec"] = upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise forms.ValidationError("The file is not UTF-8 text.") from exc
        data["priority"] = data.get("priority") or Priority.NORMAL
        if not (data.get("spec") or "").strip():
            raise forms.ValidationError("Paste a workflow spec or upload a file.")
        return data


#: The YAML the submit page composes to find error lines: a spec's own limits (docs/spec.md, "Limits").
LINES_LIMITS = DocumentLimits(max_bytes=1024 * 1024, max_aliases=100, max_depth=64, max_nodes=200_000,
                              max_yaml_nodes=100_000)

_PATH_TOKEN = re.compile(r'\.?([A-Za-z0-9_-]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def path_tokens(path: str) -> list[str | int] | None:
    """``workflow.resources.model-1.topology[0].key`` -> ``["workflow", "resources", "model-1", "topology", 0,
    "key"]`` (the path syntax of ``workflows.spec.errors``); None when the path does not parse."""
    tokens: list[str | int] = []
    position = 0
    while position < len(path):
        match = _PATH_TOKEN.match(path, position)
        if match is None or match.end() == position:
            return None
        plain, index, quoted = match.groups()
        if plain is not None:
            tokens.append(plain)
        elif index is not None:
            tokens.append(int(index))
        else:
            tokens.append(json.loads(quoted))
        position = match.end()
    return tokens


class _Composed:
    """A spec's YAML composed once, with each mapping's keys indexed on first use: the submit page looks
    up the line of every error of one spec, up to thousands of paths through the same mappings."""

    def __init__(self, root: yaml.Node) -> None:
        self.root = root
        self._keys: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}

    def entry(self, node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
        index = self._keys.get(id(node))
        if index is None:
            index = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    index[key_node.value] = (key_node, value_node)  # the last of a repeated key: the value kept
            self._keys[id(node)] = index
        return index.get(key)

    def walk(self, tokens: list[str | int]) -> tuple[yaml.Node, int]:
        """The element reached along ``tokens`` (a mapping entry's key node, a list item) and how many
        tokens matched; stops at the last element that exists."""
        anchor = node = self.root
        consumed = 0
        for token in tokens:
            if isinstance(node, yaml.MappingNode) and isinstance(token, str):
                found = self.entry(node, token)
                if found is None:
                    break
                anchor, node = found
            elif isinstance(node, yaml.SequenceNode) and isinstance(token, int) and 0 <= token < len(node.value):
                anchor = node = node.value[token]
            else:
                break
            consumed += 1
        return anchor, consumed

    def line(self, path: str) -> int | None:
        tokens = path_tokens(path) if path else None
        if not tokens:
            return None
        candidates = [tokens]
        # `resources` may sit under `workflow` (canonical) or at the top level (as seed 003 writes it).
        if tokens[:2] == ["workflow", "resources"]:
            candidates.append(tokens[1:])
        elif tokens[:1] == ["resources"]:
            candidates.append(["workflow", *tokens])
        best: tuple[int, yaml.Node] | None = None
        for candidate in candidates:
            node, consumed = self.walk(candidate)
            if consumed and (best is None or consumed > best[0]):
                best = (consumed, node)
        return None if best is None else best[1].start_mark.line + 1


def yaml_lines_for_paths(text: str, paths: list[str]) -> list[int | None]:
    """The 1-based line of the YAML element each error path points at (its key, for a mapping entry),
    or of its closest existing ancestor; None for the whole document or unreadable YAML. The text is
    composed once for all the paths, and not at all when no path names an element (an unreadable or
    too deeply nested spec says so at the whole spec), within the spec's YAML limits
    (:data:`LINES_LIMITS`): the text is what was submitted, and a template's comments may hold what its
    rendering drops (``# {% if false %}`` before 480,000 values cost the page 10 s and 300 MB).
    Pure-Python PyYAML on purpose: libyaml's composer recurses in C and crashes the process on a few
    hundred thousand ``[``, and its parser takes quadratic time on them."""
    if not any(path_tokens(path) for path in paths if path):
        return [None] * len(paths)
    loader = DocumentLoader(text, LINES_LIMITS)
    try:
        root = loader.get_single_node()
    except (yaml.YAMLError, RecursionError):  # past the limits too: the rows are shown without lines
        return [None] * len(paths)
    finally:
        loader.dispose()
    if root is None:
        return [None] * len(paths)
    composed = _Composed(root)
    return [composed.line(path) for path in paths]


def yaml_line_for_path(text: str, path: str) -> int | None:
    """:func:`yaml_lines_for_paths` for one path."""
    return yaml_lines_for_paths(text, [path])[0]
