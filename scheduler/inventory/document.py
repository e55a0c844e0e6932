"""The pool inventory document (docs/design.md §7): loading and validation into frozen values. Pure: no Django.

Inventory document, YAML or JSON::

    pool: {name: nvl72, description: "GB200 NVL72 racks"}
    topology_keys:                 # coarsest first
    - {key: zone, label: topology.kubernetes.io/zone}
    nodes:
    - name: node-0001
      labels: {topology.kubernetes.io/zone: z1}
      capacity: {gpu: 4, cpu: 144, memory: 960Gi, storage: 4Ti}
      allocated: {gpu: 0}          # used by things outside this service
      schedulable: true

:func:`load_inventory_text` reads text with :func:`parsing.load_document` under
:data:`INVENTORY_LIMITS`; :func:`parse_inventory` checks the whole document and returns an
:class:`Inventory`, or raises one :class:`InventoryInvalidError` listing every problem with its place
in the file (``nodes[3].capacity.gpu``), in document order.

Invariants of a returned :class:`Inventory`: names match the patterns below; topology keys and their
labels are unique, at most :data:`MAX_TOPOLOGY_KEYS`; node names are unique, at most
:data:`MAX_NODES_PER_FILE`; every amount is an integer in base units (GPU devices, CPU millicores,
bytes), ``0 <= allocated <= capacity`` per resource, GPUs at most :data:`MAX_GPU`.

Limits (:data:`INVENTORY_LIMITS`, docs/pools.md): an inventory needs at most
:data:`MAX_NODES_PER_FILE` node entries of at most :data:`VALUES_PER_NODE` values each, so loading
walks at most that many values; each of the :data:`MAX_ALIASES` aliases may repeat at most one node
entry's worth, so an alias bomb is refused while its few lines are composed, before anything is built.

It stays over 500 lines on purpose: the pool section, the keys and the nodes are checked in one pass that
reports every problem of the file, sharing one error list and the checks of names, mappings and durations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parsing import (
    DocumentInvalidError,
    DocumentLimits,
    ErrorList,
    PathError,
    QuantityError,
    join_path,
    load_document,
    parse_duration,
    parse_quantity,
    storable_text,
)
from parsing.loader import MAX_INT_BITS
from scheduler.resources import CAPACITY_FIELDS, RESOURCES, USED_FIELDS

# Name patterns; ``scheduler.models`` validates the same fields with the same patterns (a test keeps
# the two equal).
KEY_NAME_RE = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
POOL_NAME_RE = r"^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$"
# A Kubernetes label key: optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
LABEL_KEY_RE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"  # optional prefix: a DNS subdomain + "/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"  # name: at most 63 characters
)
# Node names as Kubernetes writes them (DNS subdomains), plus upper case and "_" for hand-written inventories.
NODE_NAME_RE = r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$"
LABEL_VALUE_RE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
NAME_HINTS = {
    KEY_NAME_RE: "use lowercase letters, digits and inner hyphens, e.g. gpu-clique",
    LABEL_KEY_RE: "use a Kubernetes label key, e.g. topology.kubernetes.io/zone",
    NODE_NAME_RE: "use letters, digits, '.', '_' and inner hyphens",
    POOL_NAME_RE: "use letters, digits, '.', '_' and inner hyphens",
}

# (inventory name, quantity kind, capacity field, external usage field)
# (name in the document, quantity kind, Node capacity field, Node external-usage field)
INVENTORY_RESOURCES: tuple[tuple[str, str, str, str], ...] = tuple(
    (r.name, r.kind, r.capacity_field, r.used_field) for r in RESOURCES
)
NODE_VALUE_FIELDS: tuple[str, ...] = ("labels", *CAPACITY_FIELDS, *USED_FIELDS, "schedulable")
POOL_FIELDS: tuple[str, ...] = ("description", "backend", "sim_task_seconds", "max_retries", "k8s_namespace",
                                "k8s_node_selector", "min_runtime", "fairshare_half_life", "browser_forwarding",
                                "starvation_wait", "preemption_grace", "refuse_never_fits")
#: The most reschedules a pool may allow a gang (the pools API's bound of ``max_retries``).
MAX_RETRIES = 100
#: The longest ``min_runtime`` (seconds): a week (``scheduler.models.MAX_MIN_RUNTIME``, a test keeps the two equal).
MAX_MIN_RUNTIME = 7 * 24 * 3600
#: The longest ``fairshare_half_life`` (seconds): 30 days (``scheduler.models.MAX_FAIRSHARE_HALF_LIFE``, a test
#: keeps the two equal).
MAX_FAIRSHARE_HALF_LIFE = 30 * 24 * 3600
#: The longest ``starvation_wait`` (seconds): 30 days (the model's and the pools API's bound too).
MAX_STARVATION_WAIT = 30 * 24 * 3600
#: The longest ``preemption_grace`` (seconds): a day (the model's and the pools API's bound too).
MAX_PREEMPTION_GRACE = 24 * 3600
#: The values of ``scheduler.choices.DispatchBackend`` (a test keeps the two equal).
POOL_BACKENDS: tuple[str, ...] = ("simulated", "kubernetes", "local")
RESERVED_POOL_NAMES = frozenset({"import"})  # /api/pools/import/ is the import endpoint
MAX_GPU = 2**31 - 1
# Real hierarchies have a handful of levels. Each key is a GROUP BY column of the capacity summary:
# PostgreSQL refuses a query of more than 1664 columns (a 500 on every read of the pool).
MAX_TOPOLOGY_KEYS = 32
MAX_NODES_PER_FILE = 200_000
#: Values one node entry takes at most in a real file: the entry, its name and schedulable flag, three
#: mappings and eight quantities (14), and its labels (a few dozen on a Kubernetes node; about a
#: hundred with GPU feature discovery).
VALUES_PER_NODE = 128
#: Values of the rest of the document: the pool section and up to MAX_TOPOLOGY_KEYS keys.
DOCUMENT_VALUES = 1024
#: Anchors share a node's capacity or labels; they are not a way to generate nodes.
MAX_ALIASES = 100
INVENTORY_LIMITS = DocumentLimits(
    max_bytes=256 * 1024 * 1024,  # about 1.3 KB per node at MAX_NODES_PER_FILE
    max_aliases=MAX_ALIASES,
    max_depth=32,  # a real inventory nests 4 deep (nodes[i].labels.key)
    max_nodes=DOCUMENT_VALUES + MAX_NODES_PER_FILE * VALUES_PER_NODE,
    # Each alias may repeat at most one node entry's worth of values.
    max_alias_values=MAX_ALIASES * VALUES_PER_NODE,
)

INVALID_MESSAGE = "The pool inventory is invalid."
UNREADABLE_MESSAGE = "The pool inventory could not be read."
INVALID_NODE_MESSAGE = "The node is invalid."


# ------------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeySpec:
    """One topology key as the file or the API gives it: its name and the node label holding its value."""

    key: str
    label: str


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine of an inventory, in base units (gpu devices, cpu millicores, bytes)."""

    name: str
    labels: dict[str, str]
    gpu: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    storage_bytes: int = 0
    used_gpu: int = 0
    used_cpu_millis: int = 0
    used_memory_bytes: int = 0
    used_storage_bytes: int = 0
    schedulable: bool = True

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in NODE_VALUE_FIELDS}


@dataclass(frozen=True, slots=True)
class Inventory:
    """A parsed, valid inventory document. ``pool_fields`` holds only the fields the file sets."""

    name: str
    pool_fields: dict[str, Any]
    keys: tuple[KeySpec, ...] | None
    nodes: tuple[NodeSpec, ...]


class InventoryInvalidError(DocumentInvalidError):
    """The inventory (or one node entry) could not be read or is invalid; ``errors`` lists every
    problem in document order, ``message`` says which (:data:`INVALID_MESSAGE`, ...)."""

    default_message = INVALID_MESSAGE


class _Errors(ErrorList):
    __slots__ = ()

    def raise_if_any(self, message: str = INVALID_MESSAGE) -> None:
        if self.errors:
            raise InventoryInvalidError(self.errors, message=message)


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
def load_inventory_text(text: str | bytes) -> dict[str, Any]:
    """Load YAML or JSON text safely under :data:`INVENTORY_LIMITS` (YAML 1.2 core schema, no
    custom tags, bounded aliases and size).

    Raises:
        InventoryInvalidError: unreadable text, with the loader's message (:data:`UNREADABLE_MESSAGE`).
    """
    try:
        return load_document(text, INVENTORY_LIMITS, what="the inventory", shape="a mapping with a 'pool' key")
    except DocumentInvalidError as exc:
        raise InventoryInvalidError(exc.errors, message=UNREADABLE_MESSAGE) from None


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------
# YAML (0x..., 0o...) can give integers of any size; Python refuses to format more than 4300 digits,
# so an error message quoting one would fail. Anything this wide is far beyond every limit here.
def _huge_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS


def _check_mapping(value: Any, path: str, errors: ErrorList, *, allowed: Iterable[str] | None = None) -> bool:
    if not isinstance(value, Mapping):
        errors.add(path, f"must be a mapping, got {type(value).__name__}")
        return False
    if allowed is not None:
        allowed_set = set(allowed)
        for key in value:
            if key not in allowed_set:
                errors.add(join_path(path, key), f"unknown field; allowed: {', '.join(sorted(allowed_set))}")
    return True


def _check_name(value: Any, path: str, errors: ErrorList, *, pattern: str, max_length: int, what: str) -> str | None:
    if not isinstance(value, str):
        errors.add(path, f"{what} must be a string")
        return None
    if not value:
        errors.add(path, f"{what} must not be empty")
        return None
    if len(value) > max_length:
        errors.add(path, f"{what} is longer than {max_length} characters")
        return None
    if not re.fullmatch(pattern, value):
        errors.add(path, f"{what} {value!r} is not valid: {NAME_HINTS.get(pattern, pattern)}")
        return None
    return value


def topology_keys_validate(keys: Any, *, path: str = "topology_keys") -> tuple[list[KeySpec], list[dict[str, str]]]:
    """Validate a list of ``{key, label}`` items or :class:`KeySpec` (coarsest first).

    Returns the keys and the errors found (``[{"path", "message"}]``, empty when valid).
    """
    errors = _Errors()
    result: list[KeySpec] = []
    if not isinstance(keys, list):
        errors.add(path, "must be a list of {key, label} items, coarsest first")
        return result, errors.to_list()
    if len(keys) > MAX_TOPOLOGY_KEYS:
        errors.add(path, f"at most {MAX_TOPOLOGY_KEYS} topology keys, got {len(keys)}")
        return result, errors.to_list()
    seen_keys: dict[str, int] = {}
    seen_labels: dict[str, int] = {}
    for index, item in enumerate(keys):
        item_path = join_path(path, index)
        if isinstance(item, KeySpec):
            item = {"key": item.key, "label": item.label}
        if not _check_mapping(item, item_path, errors, allowed=("key", "label")):
            continue
        key = _check_name(
            item.get("key"), join_path(item_path, "key"), errors, pattern=KEY_NAME_RE, max_length=63, what="key"
        )
        label = _check_name(
            item.get("label"),
            join_path(item_path, "label"),
            errors,
            pattern=LABEL_KEY_RE,
            max_length=253,
            what="label",
        )
        if key is not None and key in seen_keys:
            errors.add(join_path(item_path, "key"), f"key {key!r} is already used by {path}[{seen_keys[key]}]")
            key = None
        if label is not None and label in seen_labels:
            errors.add(
                join_path(item_path, "label"), f"label {label!r} is already used by {path}[{seen_labels[label]}]"
            )
            label = None
        if key is not None and label is not None:
            seen_keys[key] = index
            seen_labels[label] = index
            result.append(KeySpec(key=key, label=label))
    return result, errors.to_list()


def _parse_resources(value: Any, path: str, errors: ErrorList) -> dict[str, int] | None:
    if not _check_mapping(value, path, errors, allowed=[name for name, *_ in INVENTORY_RESOURCES]):
        return None
    parsed: dict[str, int] = {}
    for name, kind, _capacity, _used in INVENTORY_RESOURCES:
        if name not in value:
            continue
        if _huge_int(value[name]):
            errors.add(join_path(path, name), f"{name} is far too large")
            continue
        try:
            amount = parse_quantity(value[name], kind=kind)  # type: ignore[arg-type]
        except QuantityError as exc:
            errors.add(join_path(path, name), str(exc))
            continue
        if name == "gpu" and amount > MAX_GPU:
            errors.add(join_path(path, name), f"gpu must be at most {MAX_GPU}")
            continue
        parsed[name] = amount
    return parsed


def labels_validate(labels: Any, path: str = "labels") -> tuple[dict[str, str], list[dict[str, str]]]:
    """A node's labels checked as an inventory checks them (Kubernetes label keys and values):
    the labels and no errors, or ``{}`` and every problem with its path (``labels["rack"]``)."""
    errors = ErrorList()
    parsed = _parse_labels(labels, path, errors)
    if parsed is None or errors:
        return {}, errors.to_list()
    return parsed, []


def _parse_labels(value: Any, path: str, errors: ErrorList) -> dict[str, str] | None:
    if value is None:
        return {}
    if not _check_mapping(value, path, errors):
        return None
    labels: dict[str, str] = {}
    ok = True
    for key, label_value in value.items():
        key_path = join_path(path, key)
        if not isinstance(key, str) or not re.fullmatch(LABEL_KEY_RE, key) or len(key) > 253:
            errors.add(key_path, f"{key!r} is not a valid label key (e.g. topology.kubernetes.io/zone)")
            ok = False
            continue
        if not isinstance(label_value, str):
            shown = "" if _huge_int(label_value) else f" {label_value!r}"
            errors.add(
                key_path,
                f"label values must be strings, got {type(label_value).__name__}{shown}; quote it in YAML",
            )
            ok = False
            continue
        if len(label_value) > 63 or not re.fullmatch(LABEL_VALUE_RE, label_value):
            errors.add(key_path, f"{label_value!r} is not a valid label value (at most 63 letters, digits, '-_.')")
            ok = False
            continue
        labels[key] = label_value
    return labels if ok else None


def parse_node_spec(item: Any, path: str, errors: ErrorList | None = None) -> NodeSpec | None:
    """Validate one inventory node entry. Problems are added to ``errors``; without ``errors`` they
    are raised.

    Raises:
        InventoryInvalidError: only when ``errors`` is not given (:data:`INVALID_NODE_MESSAGE`).
    """
    own = errors is None
    found: ErrorList = _Errors() if errors is None else errors
    before = len(found)
    if not _check_mapping(item, path, found, allowed=("name", "labels", "capacity", "allocated", "schedulable")):
        if own:
            _raise(found, INVALID_NODE_MESSAGE)
        return None
    name = _check_name(
        item.get("name"), join_path(path, "name"), found, pattern=NODE_NAME_RE, max_length=253, what="node name"
    )
    labels = _parse_labels(item.get("labels"), join_path(path, "labels"), found)
    if "capacity" not in item:
        found.add(
            join_path(path, "capacity"), "capacity is required, e.g. {gpu: 8, cpu: 96, memory: 1Ti, storage: 4Ti}"
        )
        capacity = None
    else:
        capacity = _parse_resources(item["capacity"], join_path(path, "capacity"), found)
    # Absent or null: nothing allocated; anything else must be a mapping (false or [] was taken as none).
    raw_allocated = item.get("allocated")
    allocated = _parse_resources({} if raw_allocated is None else raw_allocated, join_path(path, "allocated"), found)
    schedulable = item.get("schedulable", True)
    if not isinstance(schedulable, bool):
        found.add(join_path(path, "schedulable"), "must be true or false")
    if capacity is not None and allocated is not None:
        for resource, amount in allocated.items():
            if amount > capacity.get(resource, 0):
                found.add(
                    join_path(join_path(path, "allocated"), resource),
                    f"allocated {resource} ({item['allocated'][resource]}) exceeds the node's capacity "
                    f"({item['capacity'].get(resource, 0)})",
                )
    if len(found) > before:
        if own:
            _raise(found, INVALID_NODE_MESSAGE)
        return None
    assert name is not None and labels is not None and capacity is not None and allocated is not None
    values: dict[str, Any] = {"name": name, "labels": labels, "schedulable": schedulable}
    for resource, _kind, capacity_field, used_field in INVENTORY_RESOURCES:
        values[capacity_field] = capacity.get(resource, 0)
        values[used_field] = allocated.get(resource, 0)
    return NodeSpec(**values)


def _raise(errors: ErrorList, message: str) -> None:
    if errors:
        raise InventoryInvalidError(errors.errors, message=message)


DURATIONS = "45s, 10m, 2h, 1d or 1h30m, as a spec's timeouts"
_ZERO_DURATION = re.compile(r"0+[smhd]?")


def _duration(value: Any) -> Any:
    """A pool's duration field in seconds: a number as it is, the spec's duration syntax
    (:func:`parsing.parse_duration`: ``45s``, ``10m``, ``2h``) as whole seconds, ``0``/``0s`` as 0; any
    other value as it is (its field's check refuses it, naming the field)."""
    if not isinstance(value, str):
        return value
    if _ZERO_DURATION.fullmatch(value.strip()):
        return 0
    try:
        return parse_duration(value, "duration")
    except QuantityError:
        return value


def _parse_pool_fields(value: Any, errors: ErrorList, backends: Sequence[str] = POOL_BACKENDS
                       ) -> tuple[str | None, dict[str, Any]]:
    fields_out: dict[str, Any] = {}
    if not _check_mapping(value, "pool", errors, allowed=("name", *POOL_FIELDS)):
        return None, fields_out
    name = _check_name(value.get("name"), "pool.name", errors, pattern=POOL_NAME_RE, max_length=63, what="pool name")
    if name is not None and name in RESERVED_POOL_NAMES:
        errors.add("pool.name", f"{name!r} is reserved; choose another name")
        name = None
    for text_field, max_length in (("description", 255), ("k8s_namespace", 63), ("k8s_node_selector", 255)):
        if text_field in value:
            text = value[text_field]
            if text is None:
                text = ""
            if not isinstance(text, str):
                errors.add(f"pool.{text_field}", "must be a string")
            elif not storable_text(text):
                errors.add(f"pool.{text_field}", "must not contain NUL characters or unpaired surrogates")
            elif len(text) > max_length:
                errors.add(f"pool.{text_field}", f"is longer than {max_length} characters")
            else:
                fields_out[text_field] = text
    if "backend" in value:
        if not isinstance(value["backend"], str) or value["backend"] not in backends:
            errors.add("pool.backend", f"must be one of: {', '.join(backends)}")
        else:
            fields_out["backend"] = value["backend"]
    if "sim_task_seconds" in value:
        seconds = _duration(value["sim_task_seconds"])
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e9:
            errors.add("pool.sim_task_seconds", f"must be a non-negative number of seconds or a duration ({DURATIONS})")
        else:
            fields_out["sim_task_seconds"] = float(seconds)
    if "max_retries" in value:
        retries = value["max_retries"]
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
            errors.add("pool.max_retries", f"must be a whole number from 0 to {MAX_RETRIES}")
        else:
            fields_out["max_retries"] = retries
    if "min_runtime" in value:
        seconds = _duration(value["min_runtime"])
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= MAX_MIN_RUNTIME:
            errors.add("pool.min_runtime", f"must be a whole number of seconds from 0 to {MAX_MIN_RUNTIME} "
                                           f"or a duration ({DURATIONS})")
        else:
            fields_out["min_runtime"] = seconds
    if "fairshare_half_life" in value:
        seconds = _duration(value["fairshare_half_life"])
        if (isinstance(seconds, bool) or not isinstance(seconds, int)
                or not 0 <= seconds <= MAX_FAIRSHARE_HALF_LIFE):
            errors.add("pool.fairshare_half_life",
                       f"must be a whole number of seconds from 0 (off) to {MAX_FAIRSHARE_HALF_LIFE} "
                       f"or a duration ({DURATIONS})")
        else:
            fields_out["fairshare_half_life"] = seconds
    if "browser_forwarding" in value:
        if not isinstance(value["browser_forwarding"], bool):
            errors.add("pool.browser_forwarding", "must be true or false")
        else:
            fields_out["browser_forwarding"] = value["browser_forwarding"]
    _parse_defaulted_fields(value, errors, fields_out)
    return name, fields_out


def _parse_defaulted_fields(value: Mapping[str, Any], errors: ErrorList, fields_out: dict[str, Any]) -> None:
    """The pool policies a pool may leave unset (null): the deployment's setting of the same meaning applies
    (``OSMO_STARVATION_SECONDS``, ``OSMO_PREEMPTION_GRACE_SECONDS``, ``OSMO_REFUSE_NEVER_FITS``)."""
    for duration_field, bound in (("starvation_wait", MAX_STARVATION_WAIT), ("preemption_grace", MAX_PREEMPTION_GRACE)):
        if duration_field not in value:
            continue
        seconds = _duration(value[duration_field])
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)
                                    or not 0 <= seconds <= bound):
            errors.add(f"pool.{duration_field}", f"must be null (the deployment's setting), a whole number of "
                                                 f"seconds from 0 to {bound} or a duration ({DURATIONS})")
        else:
            fields_out[duration_field] = seconds
    if "refuse_never_fits" in value:
        if value["refuse_never_fits"] is not None and not isinstance(value["refuse_never_fits"], bool):
            errors.add("pool.refuse_never_fits", "must be true, false or null (the deployment's setting)")
        else:
            fields_out["refuse_never_fits"] = value["refuse_never_fits"]


def parse_inventory(document: Any, *, backends: Sequence[str] = POOL_BACKENDS) -> Inventory:
    """Validate a whole inventory document (already loaded from YAML/JSON, or built in Python).

    Raises:
        InventoryInvalidError: with every problem found, each with its path in the document.
    """
    errors = _Errors()
    if not _check_mapping(document, "", errors, allowed=("pool", "topology_keys", "nodes")):
        errors.raise_if_any()
    if "pool" not in document:
        errors.add("pool", "required: {name: ..., description: ...}")
        name, pool_fields = None, dict[str, Any]()
    else:
        name, pool_fields = _parse_pool_fields(document["pool"], errors, backends)
    keys: list[KeySpec] | None = None
    if "topology_keys" in document:
        keys, key_errors = topology_keys_validate(
            [] if document["topology_keys"] is None else document["topology_keys"])
        errors.errors.extend(PathError(item["path"], item["message"]) for item in key_errors)
    nodes_value = document.get("nodes")
    if nodes_value is None:  # absent or null: no nodes; {} or "" is not a list (it was taken as one)
        nodes_value = []
    nodes: list[NodeSpec] = []
    if not isinstance(nodes_value, list):
        errors.add("nodes", "must be a list of nodes")
    elif len(nodes_value) > MAX_NODES_PER_FILE:
        errors.add("nodes", f"at most {MAX_NODES_PER_FILE} nodes per file")
    else:
        seen: dict[str, int] = {}
        for index, item in enumerate(nodes_value):
            spec = parse_node_spec(item, f"nodes[{index}]", errors)
            if spec is None:
                continue
            if spec.name in seen:
                errors.add(f"nodes[{index}].name", f"node {spec.name!r} is already listed at nodes[{seen[spec.name]}]")
                continue
            seen[spec.name] = index
            nodes.append(spec)
    errors.raise_if_any()
    assert name is not None
    return Inventory(
        name=name, pool_fields=pool_fields, keys=tuple(keys) if keys is not None else None, nodes=tuple(nodes)
    )
