"""Workflow labels beyond the spec's ``workflow.labels`` (docs/spec.md, "Labels"): ``--label KEY=VALUE``
assignments that override the spec's, OSMO's list selectors (``KEY=VALUE``, ``*`` wildcards, ``(a|b)``
alternatives) and the admin's label policy. Pure: the API, the CLI-facing services and other commands
that take ``--label`` (an app's submission) call :func:`label_assignments` and :func:`labels_merge`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from parsing.errors import join_path
from workflows.spec.errors import SpecError, SpecInvalidError
from workflows.spec.parser import LABEL_KEY, LABEL_PREFIX_MAX, LABEL_VALUE, MAX_LABELS

#: A selector expands to at most this many patterns (its alternatives multiplied), as OSMO's.
SELECTOR_PATTERNS_MAX = 32
#: How many selectors one listing may combine, and how long one may be.
SELECTORS_MAX = 16
SELECTOR_LENGTH_MAX = 512
#: Every pod label key is ``<prefix><key>``: at most this long in all (a DNS subdomain and a slash).
POD_LABEL_PREFIX_MAX = 200
#: Metric dimensions: at most this many keys, each with at most this many values (the rest: "other").
METRIC_KEYS_MAX = 4
METRIC_VALUES_MAX = 20
METRIC_OTHER = "other"
#: ``pod_label_keys`` holding this puts every label on the pods.
ALL_KEYS = "*"


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is no Kubernetes label key (``[prefix/]name``), or None."""
    if not LABEL_KEY.fullmatch(key) or len(key.rpartition("/")[0]) > LABEL_PREFIX_MAX:
        return (f"invalid label key {key[:80]!r}: Kubernetes label syntax, [prefix/]name with a name of at most 63 "
                "letters, digits, '-', '_', '.', starting and ending alphanumeric")
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is no (non-empty) Kubernetes label value, or None."""
    if not LABEL_VALUE.fullmatch(value):
        return (f"invalid label value {value[:80]!r}: not empty, at most 63 letters, digits, '-', '_', '.', "
                "starting and ending alphanumeric")
    return None


def label_assignments(items: Iterable[str], *, path: str = "labels") -> dict[str, str]:
    """``KEY=VALUE`` texts (``--label``) as a mapping, the last one of a key winning. Raises
    :class:`SpecInvalidError` listing every bad item at ``<path>[i]``."""
    labels: dict[str, str] = {}
    errors: list[SpecError] = []
    for index, item in enumerate(items):
        where = join_path(path, index)
        key, sep, value = item.partition("=")
        problem = ("must be KEY=VALUE" if not sep else label_key_problem(key) or label_value_problem(value))
        if problem:
            errors.append(SpecError(where, problem))
        else:
            labels[key] = value
    if errors:
        raise SpecInvalidError(errors)
    return labels


def labels_check(labels: Mapping[object, object], *, path: str = "labels") -> dict[str, str]:
    """A mapping from the API (JSON) checked as labels: text keys and values of label syntax."""
    errors: list[SpecError] = []
    kept: dict[str, str] = {}
    for key, value in labels.items():
        where = join_path(path, str(key))
        if not isinstance(key, str) or not isinstance(value, str):
            errors.append(SpecError(where, "keys and values are text"))
            continue
        problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            errors.append(SpecError(where, problem))
        else:
            kept[key] = value
    if errors:
        raise SpecInvalidError(errors)
    return kept


def labels_merge(spec_labels: Mapping[str, str], overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The spec's labels with the submission's ``--label`` values over them (OSMO's order)."""
    return {**spec_labels, **(overrides or {})}


# ------------------------------------------------------------------------------------------------
# Selectors
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``KEY=SELECTOR``: a workflow matches when its label ``key`` matches any of ``patterns`` (each a
    literal, or an anchored glob whose ``*`` stands for any run of characters)."""

    key: str
    patterns: tuple[str, ...]

    @property
    def literals(self) -> tuple[str, ...]:
        """The patterns without a wildcard (exact values)."""
        return tuple(pattern for pattern in self.patterns if "*" not in pattern)

    @property
    def globs(self) -> tuple[str, ...]:
        return tuple(pattern for pattern in self.patterns if "*" in pattern)

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        return value is not None and any(_glob_regex(pattern).fullmatch(value) for pattern in self.patterns)


class SelectorError(ValueError):
    """A selector that does not parse; the message says why."""


def _glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def _alternatives(value: str) -> list[tuple[str, ...]]:
    """The value as segments, each its alternatives: ``sim_(a|b)*`` -> ``[("sim_",), ("a", "b"), ("*",)]``."""
    segments: list[tuple[str, ...]] = []
    literal = ""
    position = 0
    while position < len(value):
        char = value[position]
        if char == "(":
            closing = value.find(")", position + 1)
            if closing == -1:
                raise SelectorError("an alternative '(' has no ')'; write (a|b)")
            inner = value[position + 1:closing]
            if "(" in inner:
                raise SelectorError("alternatives cannot be nested")
            choices = tuple(inner.split("|"))
            if len(choices) < 2 or not all(choices):
                raise SelectorError("alternatives need at least two non-empty values: (a|b)")
            if literal:
                segments.append((literal,))
                literal = ""
            segments.append(choices)
            position = closing + 1
            continue
        if char in ")|":
            raise SelectorError(f"unexpected {char!r}: alternatives are written (a|b)")
        literal += char
        position += 1
    if literal:
        segments.append((literal,))
    return segments


def selector_parse(text: str) -> LabelSelector:
    """``KEY=SELECTOR`` as a :class:`LabelSelector`. Raises :class:`SelectorError` saying why not."""
    if len(text) > SELECTOR_LENGTH_MAX:
        raise SelectorError(f"at most {SELECTOR_LENGTH_MAX} characters")
    key, sep, value = text.partition("=")
    if not sep:
        raise SelectorError(f"{text[:80]!r} is not KEY=SELECTOR")
    problem = label_key_problem(key)
    if problem:
        raise SelectorError(problem)
    if not value:
        raise SelectorError("the selector is empty: write KEY=* for any value")
    segments = _alternatives(value)
    if math.prod(len(choices) for choices in segments) > SELECTOR_PATTERNS_MAX:
        raise SelectorError(f"expands to more than {SELECTOR_PATTERNS_MAX} patterns")
    patterns = dict.fromkeys(re.sub(r"\*+", "*", "".join(parts)) for parts in itertools.product(*segments))
    for pattern in patterns:
        # a wildcard stands for at least nothing: check the rest as a label value, each * as one letter
        if pattern != "*" and label_value_problem(pattern.replace("*", "a")):
            raise SelectorError(f"{pattern[:80]!r} can match no label value: at most 63 letters, digits, '-', "
                                "'_', '.', and '*' wildcards")
    return LabelSelector(key=key, patterns=tuple(patterns))


def selectors_parse(texts: Iterable[str], *, path: str = "label") -> tuple[LabelSelector, ...]:
    """Several selectors (all must match). Raises :class:`SpecInvalidError` naming each bad one at ``path``."""
    items = list(texts)
    if len(items) > SELECTORS_MAX:
        raise SpecInvalidError([SpecError(path, f"at most {SELECTORS_MAX} label selectors")])
    selectors: list[LabelSelector] = []
    errors: list[SpecError] = []
    for text in items:
        try:
            selectors.append(selector_parse(text))
        except SelectorError as exc:
            errors.append(SpecError(path, f"{text[:80]!r}: {exc}"))
    if errors:
        raise SpecInvalidError(errors)
    return tuple(selectors)


# ------------------------------------------------------------------------------------------------
# The admin's policy
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LabelPolicy:
    """What an admin allows and asks of a workflow's labels, and where they go.

    ``allowed_keys`` empty: any key. ``pod_label_keys``: the keys copied onto pods (``*``: all), each
    as ``<pod_label_prefix><key>``. ``metric_values``: the keys that become metric dimensions, each with
    the values counted by name (any other value counts as ``other``): a bounded set of series."""

    allowed_keys: tuple[str, ...] = ()
    required_keys: tuple[str, ...] = ()
    max_labels: int = MAX_LABELS
    pod_label_keys: tuple[str, ...] = (ALL_KEYS,)
    pod_label_prefix: str = ""
    metric_values: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    def check(self, labels: Mapping[str, str], *, path: str = "labels") -> list[SpecError]:
        """What ``labels`` break of the policy, each at ``<path>.<key>`` (or ``path``)."""
        errors: list[SpecError] = []
        limit = min(self.max_labels, MAX_LABELS)
        if len(labels) > limit:
            errors.append(SpecError(path, f"{len(labels)} labels; a workflow has at most {limit}"))
        if self.allowed_keys:
            allowed = set(self.allowed_keys)
            for key in sorted(labels):
                if key not in allowed:
                    errors.append(SpecError(join_path(path, key), f"label key {key!r} is not allowed; allowed: "
                                                                 f"{', '.join(sorted(allowed))}"))
        for key in self.required_keys:
            if key not in labels:
                errors.append(SpecError(join_path(path, key), f"label {key!r} is required (set it in the spec's "
                                                             f"workflow.labels or with --label {key}=VALUE)"))
        for key in self.pod_labels(labels):
            if label_key_problem(key):
                errors.append(SpecError(join_path(path, key.removeprefix(self.pod_label_prefix)),
                                        f"with the pod label prefix {self.pod_label_prefix!r} the key {key[:80]!r} "
                                        "is too long for a Kubernetes label"))
        return errors

    def pod_labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        """The labels a workflow's pods carry: the chosen keys, prefixed."""
        chosen = labels if ALL_KEYS in self.pod_label_keys else {
            key: value for key, value in labels.items() if key in self.pod_label_keys}
        return {f"{self.pod_label_prefix}{key}": value for key, value in chosen.items()}

    def metric_dimensions(self, labels: Mapping[str, str]) -> list[tuple[str, str]]:
        """``(key, value)`` per metric key: the value when allow-listed, ``other`` when not, ``""`` when unset."""
        dimensions = []
        for key, values in self.metric_values[:METRIC_KEYS_MAX]:
            value = labels.get(key)
            shown = "" if value is None else value if value in values[:METRIC_VALUES_MAX] else METRIC_OTHER
            dimensions.append((key, shown))
        return dimensions


def policy_problems(policy: LabelPolicy) -> dict[str, str]:
    """What is wrong with a policy an admin wrote, by field (the admin form's errors)."""
    problems: dict[str, str] = {}
    for name in ("allowed_keys", "required_keys"):
        bad = [key for key in getattr(policy, name) if label_key_problem(key)]
        if bad:
            problems[name] = f"not label keys: {', '.join(bad)}"
    bad_pod = [key for key in policy.pod_label_keys if key != ALL_KEYS and label_key_problem(key)]
    if bad_pod:
        problems["pod_label_keys"] = f"not label keys: {', '.join(bad_pod)}"
    if policy.allowed_keys and not set(policy.required_keys) <= set(policy.allowed_keys):
        problems["required_keys"] = "a required key must also be allowed"
    if not 0 <= policy.max_labels <= MAX_LABELS:
        problems["max_labels"] = f"between 0 and {MAX_LABELS}"
    prefix = policy.pod_label_prefix
    if len(prefix) > POD_LABEL_PREFIX_MAX or (prefix and label_key_problem(f"{prefix}x")):
        problems["pod_label_prefix"] = ("prefix + key must be a label key: a DNS subdomain and '/' (example.com/), "
                                        "or letters, digits, '-', '_', '.' starting alphanumeric")
    if len(policy.metric_values) > METRIC_KEYS_MAX:
        problems["metric_values"] = f"at most {METRIC_KEYS_MAX} keys"
    for key, values in policy.metric_values:
        if label_key_problem(key) or len(values) > METRIC_VALUES_MAX or any(label_value_problem(v) for v in values):
            problems["metric_values"] = (f"{key!r}: a label key with at most {METRIC_VALUES_MAX} label values")
    return problems
