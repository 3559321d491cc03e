"""Kubernetes resource quantities (`100m`, `2Gi`, `1.5`, `1e3`, `500M`, `0.5Ki`).

Parsed exactly (as Kubernetes does) and rounded up into the integer units the planner uses:
milli-units for CPU, whole units for everything else. Listing 150k pods parses ~1M quantities, so the
common shapes take a fast path and results are memoised.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from reconciler.domain.errors import UserError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?$"
)


class QuantityError(UserError):
    """A string that is not a Kubernetes quantity."""


@lru_cache(maxsize=65536)
def parse_quantity(text: str) -> Fraction:
    """Exact value of a quantity string; raises QuantityError naming the bad text."""
    if not isinstance(text, str):
        text = str(text)
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(
            f"{text!r} is not a Kubernetes quantity (use forms like 100m, 1.5, 2Gi, 500M, 1e3)"
        )
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > 30:
            raise QuantityError(f"{text!r}: exponent {exponent} is out of range")
        number *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -number if match["sign"] == "-" else number


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


@lru_cache(maxsize=65536)
def milli_value(text: str) -> int:
    """Value in thousandths, rounded up (Kubernetes' MilliValue): the unit for CPU."""
    if text.isdigit():
        return int(text) * 1000
    if text.endswith("m") and text[:-1].isdigit():
        return int(text[:-1])
    return _ceil(parse_quantity(text) * 1000)


@lru_cache(maxsize=65536)
def int_value(text: str) -> int:
    """Value rounded up to a whole unit (Kubernetes' Value): memory in bytes, pods, GPUs."""
    if text.isdigit():
        return int(text)
    suffix = text[-2:]
    if suffix in _BINARY and text[:-2].isdigit():
        return int(text[:-2]) * _BINARY[suffix]
    return _ceil(parse_quantity(text))


def format_cpu(milli: int) -> str:
    """Milli-CPU as people write it: `1500m`, `2`."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(value: int) -> str:
    """Bytes in the largest binary unit that keeps one decimal: `1.4Gi`, `512Mi`."""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if abs(value) >= size:
            scaled = value / size
            return f"{scaled:.0f}{unit}" if scaled == int(scaled) else f"{scaled:.1f}{unit}"
    return str(value)
