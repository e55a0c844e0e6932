"""Forms of the status pages: the workflow list filters and the submit page."""

from __future__ import annotations

from typing import Any, cast

import yaml
from django import forms

from parsing.loader import DocumentLimits, DocumentLoader
from parsing.yamlpos import ComposedYaml, path_segments
from workflows.choices import Priority, WorkflowStatus
from workflows.selectors import SELECTORS_MAX, LabelSelector, SelectorError, selector_parse

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
    label = forms.CharField(required=False, max_length=1024, widget=forms.TextInput(
        attrs={"placeholder": "team=robotics project=sim_*", "title": "KEY=SELECTOR: an exact value, * wildcards or "
               "(a|b) alternatives; several separated by spaces must all match"}))
    tag = forms.ChoiceField(choices=[("", "any tag")], required=False)
    sort = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, pool_names: list[str], tag_names: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pool = cast(forms.ChoiceField, self.fields["pool"])
        pool.choices = [("", "any pool"), *[(name, name) for name in pool_names]]
        tag = cast(forms.ChoiceField, self.fields["tag"])
        tag.choices = [("", "any tag"), *[(name, name) for name in tag_names or []]]

    def clean_label(self) -> str:
        text = self.cleaned_data.get("label") or ""
        self.selectors(text)
        return text

    @staticmethod
    def selectors(text: str) -> tuple[LabelSelector, ...]:
        """The label field's selectors (space-separated); a form error saying which one does not parse."""
        items = text.split()
        if len(items) > SELECTORS_MAX:
            raise forms.ValidationError(f"At most {SELECTORS_MAX} label selectors.")
        parsed = []
        for item in items:
            try:
                parsed.append(selector_parse(item))
            except SelectorError as exc:
                raise forms.ValidationError(f"{item[:80]}: {exc}") from exc
        return tuple(parsed)

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


def _closest_line(composed: ComposedYaml, path: str) -> int | None:
    """The line of the element ``path`` points at, or of its closest existing ancestor. ``resources``
    may sit under ``workflow`` (canonical) or at the top level (as seed 003 writes it): the spelling
    that reaches deeper wins."""
    segments = path_segments(path) if path else None
    if not segments:
        return None
    candidates = [segments]
    if segments[:2] == ["workflow", "resources"]:
        candidates.append(segments[1:])
    elif segments[:1] == ["resources"]:
        candidates.append(["workflow", *segments])
    best: tuple[int, Any] | None = None
    for candidate in candidates:
        node, consumed = composed.walk(candidate)
        if consumed and (best is None or consumed > best[0]):
            best = (consumed, node)
    return None if best is None else composed.line_at(best[1])


def yaml_lines_for_paths(text: str, paths: list[str]) -> list[int | None]:
    """The 1-based line of the YAML element each error path points at (its key, for a mapping entry),
    or of its closest existing ancestor; None for the whole document or unreadable YAML. The text is
    composed once for all the paths, and not at all when no path names an element (an unreadable or
    too deeply nested spec says so at the whole spec), within the spec's YAML limits
    (:data:`LINES_LIMITS`): the text is what was submitted, and a template's comments may hold what its
    rendering drops (``# {% if false %}`` before 480,000 values cost the page 10 s and 300 MB).
    Pure-Python PyYAML on purpose: libyaml's composer recurses in C and crashes the process on a few
    hundred thousand ``[``, and its parser takes quadratic time on them."""
    if not any(path_segments(path) for path in paths if path):
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
    composed = ComposedYaml(root, text)
    return [_closest_line(composed, path) for path in paths]


def yaml_line_for_path(text: str, path: str) -> int | None:
    """:func:`yaml_lines_for_paths` for one path."""
    return yaml_lines_for_paths(text, [path])[0]
