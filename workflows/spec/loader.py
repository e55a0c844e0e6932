"""Safe loading of spec documents: :func:`parsing.load_document` under the limits of a workflow spec.

The generic part (YAML 1.2 core schema, JSON data model only, alias and size limits, storable text)
lives in :mod:`parsing.loader`; this module sets the spec's limits and turns every loading problem
into a :class:`~workflows.spec.errors.SpecInvalidError`, the only exception that escapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parsing.errors import DocumentInvalidError
from parsing.loader import DocumentLimits
from parsing.loader import load_document as _load_document
from workflows.spec.errors import SpecError, SpecInvalidError


@dataclass(frozen=True, slots=True)
class SpecLimits(DocumentLimits):
    """Size limits applied to every submitted spec. Alias fan-out is bounded by ``max_nodes`` (the
    walk after loading) and ``max_aliases``; ``max_alias_values`` stays unset. ``max_yaml_nodes``
    bounds the YAML composed (docs/spec.md, "Limits")."""

    max_bytes: int = 1024 * 1024
    max_aliases: int = 100
    max_depth: int = 64
    max_nodes: int = 200_000
    max_alias_values: int | None = None
    #: keys included; what one web process may spend composing a spec (~2 s), where a spec of the
    #: 1,000 tasks allowed, each with a few dozen fields and variables, takes ~40,000
    max_yaml_nodes: int | None = 100_000
    max_tasks: int = 1000


def load_document(source: object, limits: SpecLimits, warnings: list[SpecError] | None = None) -> dict[str, Any]:
    """Load a spec from YAML/JSON text (``str`` or UTF-8 ``bytes``) or a mapping, within ``limits``.

    Returns the top-level mapping (not yet validated against the spec schema). With ``warnings``, a
    key repeated in a mapping keeps its last value, as OSMO's loader does, and is reported there
    (path, both lines); without, it is an error.

    Raises:
        SpecInvalidError: unreadable, unsafe, too large, or not a mapping.
    """
    try:
        return _load_document(source, limits, what="the spec", shape="a mapping with a 'workflow' key",
                              duplicates=warnings)
    except DocumentInvalidError as exc:
        raise SpecInvalidError(exc.errors) from None
