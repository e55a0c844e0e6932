"""What every document parser of the service needs. Pure: stdlib and PyYAML only.

- :mod:`parsing.quantity`: Kubernetes resource quantities and durations, parsed to exact integers.
- :mod:`parsing.loader`: safe loading of YAML/JSON documents under :class:`DocumentLimits`.
- :mod:`parsing.errors`: problems with the path of the offending value (``nodes[3].capacity.gpu``).
- :mod:`parsing.natural`: the natural order of names (``shard2`` before ``shard10``), shared with
  the status pages and the CLI.

The workflow spec parser (``workflows.spec``) and the pool inventory parser (``scheduler.inventory``)
both build on it; it imports neither.
"""

from parsing.errors import DocumentInvalidError, ErrorList, PathError, join_path
from parsing.loader import (
    BAD_NAME_MESSAGE,
    BAD_TEXT_MESSAGE,
    MAX_INT_BITS,
    DocumentLimits,
    DocumentLoader,
    load_document,
    storable_text,
)
from parsing.natural import natural_key, natural_sorted
from parsing.quantity import (
    MAX_DURATION_S,
    MAX_QUANTITY,
    QUANTITY_KINDS,
    QuantityError,
    QuantityKind,
    format_quantity,
    parse_duration,
    parse_quantity,
)

__all__ = [
    "BAD_NAME_MESSAGE",
    "BAD_TEXT_MESSAGE",
    "MAX_DURATION_S",
    "MAX_INT_BITS",
    "MAX_QUANTITY",
    "QUANTITY_KINDS",
    "DocumentInvalidError",
    "DocumentLimits",
    "DocumentLoader",
    "ErrorList",
    "PathError",
    "QuantityError",
    "QuantityKind",
    "format_quantity",
    "join_path",
    "load_document",
    "natural_key",
    "natural_sorted",
    "parse_duration",
    "parse_quantity",
    "storable_text",
]
