"""Admin form fields for nodes: capacities typed as Kubernetes quantities and labels as key/value rows.

- :class:`QuantityField`: ``64``, ``500m``, ``1.5`` for CPU; ``512Gi``, ``960G``, ``4Ti`` for memory
  and storage; whole numbers for GPUs. Parsed by :func:`parsing.parse_quantity` (the parser of
  workflow specs and pool inventories) into the model's units (millicores, bytes); shown back with
  :func:`parsing.format_quantity`. Errors name the field: ``CPU used: invalid cpu quantity 'x'; ...``.
- :class:`LabelsField` with :class:`LabelsWidget`: one row per label (key, value) and a few blank rows
  to add more; emptying both cells of a row removes that label. Keys and values are checked as an
  inventory checks them (:func:`scheduler.inventory.labels_validate`); a duplicate key or a value
  without a key is an error naming the row.
- :class:`NodeAdminForm`: both, and a used amount above its capacity is refused on the used field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from parsing import QuantityError, QuantityKind, format_quantity, parse_quantity
from parsing.natural import natural_key
from scheduler.inventory import labels_validate
from scheduler.models import Node
from scheduler.resources import RESOURCES

MAX_INTEGER = 2**31 - 1
BLANK_LABEL_ROWS = 3
MAX_LABEL_ROWS = 200

QUANTITY_HELP: dict[str, str] = {
    "gpu": "Whole devices, e.g. 8.",
    "cpu": "Cores as a Kubernetes quantity: 64, 1.5 or 500m (millicores).",
    "memory": "A Kubernetes quantity: 512Gi, 1.5Ti (powers of 1024) or 960G (powers of 1000); a plain number is bytes.",
    "storage": "A Kubernetes quantity: 4Ti, 500Gi (powers of 1024) or 4T (powers of 1000); a plain number is bytes.",
}

#: Each resource's name on the node form (its used amount: the same, "used").
RESOURCE_LABELS: dict[str, str] = {"gpu": "GPUs", "cpu": "CPU", "memory": "Memory", "storage": "Storage"}
# model field -> (quantity kind, label, capacity field when this one is a used amount)
NODE_QUANTITY_FIELDS: dict[str, tuple[QuantityKind, str, str | None]] = {
    field: value
    for r in RESOURCES
    for field, value in (
        (r.capacity_field, (cast(QuantityKind, r.kind), RESOURCE_LABELS[r.name], None)),
        (r.used_field, (cast(QuantityKind, r.kind), f"{RESOURCE_LABELS[r.name]} used", r.capacity_field)),
    )
}


class QuantityField(forms.Field):
    """A Kubernetes quantity in a text box, cleaned to the integer unit of ``kind``."""

    widget = forms.TextInput

    def __init__(self, *, kind: QuantityKind, max_value: int | None = None, **kwargs: Any) -> None:
        self.kind = kind
        self.max_value = max_value
        kwargs.setdefault("help_text", QUANTITY_HELP[kind])
        super().__init__(**kwargs)
        self.widget.attrs.update({"size": 12, "maxlength": 64, "spellcheck": "false"})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return format_quantity(value, self.kind)
        return value

    def to_python(self, value: Any) -> int | None:
        text = str(value).strip() if value is not None else ""
        if not text:
            return None
        try:
            amount = parse_quantity(text, self.kind)
        except QuantityError as exc:
            raise forms.ValidationError(f"{self.label}: {exc}.", code="invalid_quantity") from exc
        if self.max_value is not None and amount > self.max_value:
            raise forms.ValidationError(
                f"{self.label}: {text!r} is more than {format_quantity(self.max_value, self.kind)}.", code="too_large"
            )
        return amount

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or 0)
        except forms.ValidationError:
            return True


LabelRows = list[tuple[str, str]]


class LabelsWidget(forms.Widget):
    """Key/value rows: ``<name>-key-<i>`` and ``<name>-value-<i>``, the row count in ``<name>-rows``."""

    def format_value(self, value: Any) -> LabelRows:  # type: ignore[override]  # rows, not a string
        if isinstance(value, Mapping):
            return sorted(((str(k), str(v)) for k, v in value.items()), key=lambda row: natural_key(row[0]))
        if isinstance(value, list):
            return [(str(k), str(v)) for k, v in value]
        return []

    def value_from_datadict(self, data: Any, files: Any, name: str) -> LabelRows | None:
        try:
            count = min(int(data.get(f"{name}-rows", "")), MAX_LABEL_ROWS)
        except ValueError:
            return None
        return [
            (str(data.get(f"{name}-key-{index}", "")).strip(), str(data.get(f"{name}-value-{index}", "")).strip())
            for index in range(count)
        ]

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-rows" not in data

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        rows = [*self.format_value(value), *[("", "")] * BLANK_LABEL_ROWS]
        body = format_html_join(
            "\n",
            '<tr><td><input type="text" name="{0}-key-{1}" value="{2}" size="40" aria-label="label key {3}"></td>'
            '<td><input type="text" name="{0}-value-{1}" value="{4}" size="24" aria-label="label value {3}"></td></tr>',
            ((name, index, key, index + 1, label_value) for index, (key, label_value) in enumerate(rows)),
        )
        element_id = (attrs or {}).get("id") or f"id_{name}"
        return format_html(
            '<table class="labels-rows" id="{}"><thead><tr><th>key</th><th>value</th></tr></thead>'
            '<tbody>\n{}\n</tbody></table><input type="hidden" name="{}-rows" value="{}">',
            element_id, body, name, len(rows),
        )


class LabelsField(forms.Field):
    """Key/value rows cleaned into a label dict (Kubernetes keys and values)."""

    widget = LabelsWidget

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "One label per row, e.g. topology.kubernetes.io/zone = z1. Clear both cells to remove a label; "
            "save and continue to get more blank rows.",
        )
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> dict[str, str]:
        if value is None:
            raise forms.ValidationError("Labels: the label rows were not sent; reload the page.", code="invalid")
        if isinstance(value, Mapping):
            value = list(value.items())
        labels: dict[str, str] = {}
        problems: list[str] = []
        for index, (key, label_value) in enumerate(value, start=1):
            if not key and not label_value:
                continue
            if not key:
                problems.append(f"Labels row {index}: value {label_value!r} has no key.")
            elif key in labels:
                problems.append(f"Labels row {index}: key {key!r} appears twice.")
            else:
                labels[key] = label_value
        parsed, errors = labels_validate(labels)
        problems += [f"Labels {error['path'].removeprefix('labels')}: {error['message']}." for error in errors]
        if problems:
            raise forms.ValidationError(problems, code="invalid")
        return parsed

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or {})
        except forms.ValidationError:
            return True


class NodeAdminForm(forms.ModelForm):
    labels = LabelsField(required=False)

    class Meta:
        model = Node
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field_name, (kind, label, _capacity) in NODE_QUANTITY_FIELDS.items():
            if field_name not in self.fields:
                continue
            self.fields[field_name] = QuantityField(
                kind=kind, label=label, required=False, initial=0,
                max_value=MAX_INTEGER if kind == "gpu" else None,  # PositiveIntegerField; the others are bigint
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data
        for field_name, (kind, label, capacity_field) in NODE_QUANTITY_FIELDS.items():
            if cleaned.get(field_name) is None and field_name in self.fields and field_name not in self.errors:
                cleaned[field_name] = 0  # left empty: none
            if capacity_field is None or field_name in self.errors or capacity_field in self.errors:
                continue
            used, capacity = cleaned.get(field_name), cleaned.get(capacity_field)
            if used is not None and capacity is not None and used > capacity:
                capacity_label = NODE_QUANTITY_FIELDS[capacity_field][1]
                self.add_error(
                    field_name,
                    f"{label} ({format_quantity(used, kind)}) is more than the node's {capacity_label} "
                    f"({format_quantity(capacity, kind)}).",
                )
        return cleaned
