"""Kubernetes resource quantities and durations, parsed to exact integers. Pure: stdlib only.

Used for the resources of workflow specs and for the capacity of pool inventories and Kubernetes
node objects, so both read ``960Gi`` or ``500m`` the same way.

Quantities follow Kubernetes' grammar: a non-negative decimal number (``1``, ``1.5``, ``.5``) and an
optional suffix, one of the binary SI suffixes ``Ki Mi Gi Ti Pi Ei`` (powers of 1024), the decimal
SI suffixes ``n u m k M G T P E`` (powers of 1000) or a decimal exponent (``2e3``, ``1E-3``). YAML
numbers (``cpu: 0.5``) are accepted too. Arithmetic is exact (:class:`fractions.Fraction`, floats are
read through their shortest ``repr``), and the result is converted to the unit of the resource:

====================  ==========  ===============================================================
kind                  unit        rule
====================  ==========  ===============================================================
``gpu``               devices     must be a whole number (``0.5`` is an error)
``cpu``               millicores  ``1`` -> 1000, ``500m`` -> 500; finer than ``1m`` is an error
``memory``/``storage``  bytes     ``1Ki`` -> 1024, ``1k`` -> 1000; fractional bytes are an error
====================  ==========  ===============================================================

Negative values, garbage, and values above ``2**63 - 1`` in the target unit raise
:class:`QuantityError` (a ``ValueError``) with a message naming the resource and the input.

Invariant: ``parse_quantity(format_quantity(n, kind), kind) == n`` for every ``n`` it returned.

Durations (timeouts) are integer seconds or ``<int><unit>`` terms with units ``s m h d``
(``45s``, ``30m``, ``2h``, ``1d``, ``1h30m``).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Literal

QuantityKind = Literal["gpu", "cpu", "memory", "storage"]
QUANTITY_KINDS: tuple[QuantityKind, ...] = ("gpu", "cpu", "memory", "storage")

MAX_QUANTITY = 2**63 - 1
MAX_DURATION_S = 2**31 - 1
_MAX_TEXT = 64
_MAX_EXPONENT = 30

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -3, "u": -2, "m": -1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_UNIT_SCALE: dict[str, int] = {"gpu": 1, "cpu": 1000, "memory": 1, "storage": 1}

_DURATION_TERM = re.compile(r"([0-9]+)([smhd])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_HINT = "expected a non-negative number with an optional Kubernetes suffix, e.g. 4, 500m, 1.5, 64Gi, 2e3"


class QuantityError(ValueError):
    """A quantity or duration that cannot be used; the message is meant for the user."""


def _describe(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT] + "..."
    return repr(text) if isinstance(value, str) else text


def _exact(value: object, kind: str) -> Fraction:
    """The exact value of ``value`` in base units (cores for cpu), sign included."""
    if isinstance(value, bool):
        raise QuantityError(f"{kind} must be a quantity, got a boolean ({_describe(value)}); {_HINT}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{kind} must be a finite quantity, got {_describe(value)}")
        return Fraction(Decimal(repr(value)))
    if not isinstance(value, str):
        got = "null" if value is None else type(value).__name__
        raise QuantityError(f"{kind} must be a quantity (a string or a number), got {got}")
    if len(value) > _MAX_TEXT:
        raise QuantityError(f"{kind} quantity {_describe(value)} is too long; {_HINT}")
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise QuantityError(f"invalid {kind} quantity {_describe(value)}; {_HINT}")
    try:
        number = Fraction(Decimal(match["number"]))
    except (InvalidOperation, ValueError) as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"invalid {kind} quantity {_describe(value)}; {_HINT}") from exc
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        number *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= Fraction(1000) ** _DECIMAL[suffix]
    elif suffix:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"{kind} quantity {_describe(value)} is out of range")
        number *= Fraction(10) ** exponent
    return -number if match["sign"] == "-" else number


def parse_quantity(value: object, kind: QuantityKind) -> int:
    """Parse a Kubernetes quantity to an exact integer in the unit of ``kind``.

    ``gpu`` -> whole devices, ``cpu`` -> millicores, ``memory``/``storage`` -> bytes.

    Raises:
        QuantityError: garbage, negative, fractional where the unit forbids it, or too large.
    """
    if kind not in _UNIT_SCALE:
        raise ValueError(f"unknown quantity kind {kind!r}")
    exact = _exact(value, kind)
    if exact < 0:
        raise QuantityError(f"{kind} must not be negative, got {_describe(value)}")
    scaled = exact * _UNIT_SCALE[kind]
    if scaled.denominator != 1:
        if kind == "gpu":
            raise QuantityError(f"gpu must be a whole number of devices, got {_describe(value)}")
        if kind == "cpu":
            raise QuantityError(f"cpu must be a multiple of 1m (0.001 cores), got {_describe(value)}")
        raise QuantityError(f"{kind} must be a whole number of bytes, got {_describe(value)}")
    result = int(scaled)
    if result > MAX_QUANTITY:
        raise QuantityError(f"{kind} quantity {_describe(value)} is too large")
    return result


def format_quantity(value: int, kind: QuantityKind) -> str:
    """Render an integer from :func:`parse_quantity` back as the shortest exact Kubernetes quantity:
    ``512Gi`` for a binary size, ``960G`` rather than ``937500000Ki`` for a decimal one (binary on a tie).

    ``format_quantity(parse_quantity(q, kind), kind)`` parses back to the same integer.
    """
    if kind == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    text = str(value)
    if kind in ("memory", "storage") and value:
        for units, base in ((_BINARY, 1024), (_DECIMAL, 1000)):
            for suffix, power in sorted(units.items(), key=lambda item: -item[1]):
                if power > 0 and value % (base**power) == 0:
                    candidate = f"{value // base**power}{suffix}"
                    text = candidate if len(candidate) < len(text) else text
                    break
    return text


def parse_duration(value: object, what: str = "timeout") -> int:
    """Parse a duration to whole seconds: an integer number of seconds (``3600``, ``"3600"``) or
    ``<int><unit>`` terms, units ``s m h d`` (``"45s"``, ``"30m"``, ``"2h"``, ``"1d"``, ``"1h30m"``).

    Raises:
        QuantityError: not a duration, zero, or longer than ``2**31 - 1`` seconds.
    """
    hint = "expected seconds or a duration like 45s, 30m, 2h, 1d"
    if isinstance(value, bool):
        raise QuantityError(f"{what} must be a duration, got a boolean; {hint}")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > _MAX_TEXT:
            raise QuantityError(f"{what} {_describe(value)} is too long; {hint}")
        if text.isascii() and text.isdigit():
            seconds = int(text)
        else:
            terms = _DURATION_TERM.findall(text)
            if not terms or "".join(number + unit for number, unit in terms) != text:
                raise QuantityError(f"invalid {what} {_describe(value)}; {hint}")
            seconds = sum(int(number) * _DURATION_UNITS[unit] for number, unit in terms)
    else:
        raise QuantityError(f"{what} must be a duration, got {type(value).__name__}; {hint}")
    if seconds <= 0:
        raise QuantityError(f"{what} must be positive, got {_describe(value)}")
    if seconds > MAX_DURATION_S:
        raise QuantityError(f"{what} {_describe(value)} is too long (at most {MAX_DURATION_S} seconds)")
    return seconds
