"""Forms of the apps pages: the list's filters, and the launch form with one field per parameter."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from pages.viewmodels.apps import ParameterField
from workflows.choices import Priority


class AppListForm(forms.Form):
    scope = forms.ChoiceField(choices=[("mine", "mine"), ("all", "all users")], required=False)
    name = forms.CharField(required=False, max_length=63, widget=forms.TextInput(attrs={"placeholder": "name"}))

    def value(self, name: str) -> str:
        return (self.cleaned_data.get(name) or "") if self.is_valid() else ""


class AppLaunchForm(forms.Form):
    """The pool, the priority and a text field per editable parameter (``param_<name>``), prefilled
    with its default."""

    pool = forms.ChoiceField(choices=[])
    priority = forms.ChoiceField(choices=Priority.choices, initial=Priority.NORMAL)

    def __init__(self, *args: Any, fields: list[ParameterField], pool_names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parameters = fields
        cast(forms.ChoiceField, self.fields["pool"]).choices = [(name, name) for name in pool_names]
        for field in fields:
            if field.editable:
                self.fields[f"param_{field.name}"] = forms.CharField(
                    label=field.name, required=False, initial=field.default_text, max_length=4096,
                    strip=False, help_text=field.comment)

    def parameter_rows(self) -> list[tuple[ParameterField, forms.BoundField | None]]:
        """Each parameter with its input (None: a list or mapping default, kept as it is)."""
        return [(field, self[f"param_{field.name}"] if field.editable else None) for field in self.parameters]
