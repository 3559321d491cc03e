"""Kubernetes resource quantities (`100m`, `2Gi`, `1.5`, `1e3`, `500M`, `0.5Ki`).

Read as apimachinery's ParseQuantity reads them (k8s.io/apimachinery/pkg/api/resource/quantity.go):
the same grammar (a sign, digits with an optional `.` part, then a binary suffix `Ki`..`Ei`, a
decimal one `n`..`E`, or an exponent `e`/`E` with a sign), exact, and rounded up into the integer
units the planner uses: milli-units for CPU, whole units for everything else. A value the API
server accepted never makes a reader fail: as int64Amount.AsScaledInt64 does, a value past the
int64 range saturates to its bound (`memory: 1e33` is "more than any node has", which the planner
handles), and a non-zero value below a nano rounds up to the smallest unit. Only text that is no
quantity at all raises QuantityError. Listing 150k pods parses ~1M quantities, so the common shapes
take a fast path and results are memoised.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from reconciler.domain.errors import UserError

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?$"
)
# Decimal exponents beyond these give values that saturate every unit we read (milli-units of
# 10^22 exceed int64) or that round up to the smallest one: no need to build 10^(10^18).
_HUGE = 23
_TINY = -40
_DIGITS = 40  # significant digits kept of a longer number (rounded up: only the ceiling is used)


class QuantityError(UserError):
    """A string that is not a Kubernetes quantity."""


def _not_a_quantity(text: str) -> QuantityError:
    """The error, quoting at most 40 characters: the text may be a tenant's, and end up in a plan."""
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
    return QuantityError(f"{shown} is not a Kubernetes quantity (use forms like 100m, 1.5, 2Gi, 500M, 1e3)")


@lru_cache(maxsize=65536)
def parse_quantity(text: str) -> Fraction:
    """The value of a quantity string, exact where it can matter: one beyond 10^23 is read as
    10^23 (it saturates whatever unit it is read in), one with more than 40 significant digits is
    rounded up in the 40th. Raises QuantityError for text ParseQuantity refuses."""
    if not isinstance(text, str):
        text = str(text)
    stripped_text = text.strip()
    match = _QUANTITY.match(stripped_text) if stripped_text else None
    if match is None:  # (an empty number is zero, as in Go: `Ki`, `e3`, `-` and `.` are 0)
        raise _not_a_quantity(text)
    digits = (match["int"] + (match["frac"] or "")).lstrip("0")
    exponent = -len(match["frac"] or "")  # value = int(digits) * 10^exponent * suffix
    if match["exp"] is not None:
        parsed = int(match["exp"])
        if not INT64_MIN <= parsed <= INT64_MAX:  # strconv.ParseInt fails: ErrSuffix
            raise _not_a_quantity(text)
        exponent += (parsed + 2**31) % 2**32 - 2**31  # Go keeps it as an int32
        multiplier = 1
    else:
        suffix = match["suffix"] or ""
        multiplier = _BINARY.get(suffix, 1)
        exponent += _DECIMAL.get(suffix, 0)
    if not digits:
        return Fraction(0)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    if len(stripped) > _DIGITS:  # the rest only nudges the value up: keep the ceiling right
        exponent += len(stripped) - _DIGITS
        mantissa = int(stripped[:_DIGITS]) + 1
    else:
        mantissa = int(stripped)
    magnitude = len(str(mantissa)) - 1 + exponent  # value * suffix ~ 10^magnitude
    if magnitude > _HUGE:
        value = Fraction(10**_HUGE)
    elif magnitude < _TINY:
        value = Fraction(1, 10**-_TINY)
    else:
        value = Fraction(mantissa * multiplier) * Fraction(10) ** exponent
        multiplier = 1
    value *= multiplier
    return -value if match["sign"] == "-" else value


def _ceil(value: Fraction) -> int:
    """Rounded up, saturated to int64 (apimachinery's AsScaledInt64)."""
    return max(INT64_MIN, min(INT64_MAX, -((-value.numerator) // value.denominator)))


@lru_cache(maxsize=65536)
def milli_value(text: str) -> int:
    """Value in thousandths, rounded up (Kubernetes' MilliValue): the unit for CPU."""
    if text.isascii() and text.isdigit() and len(text) < 16:
        return int(text) * 1000
    if text.endswith("m") and text.isascii() and text[:-1].isdigit() and len(text) < 19:
        return int(text[:-1])
    return _ceil(parse_quantity(text) * 1000)


@lru_cache(maxsize=65536)
def int_value(text: str) -> int:
    """Value rounded up to a whole unit (Kubernetes' Value): memory in bytes, pods, GPUs."""
    if text.isascii() and text.isdigit() and len(text) < 19:
        return int(text)
    suffix = text[-2:]
    if suffix in _BINARY and text.isascii() and text[:-2].isdigit() and len(text) < 7:
        return min(INT64_MAX, int(text[:-2]) * _BINARY[suffix])  # 8Ei is past int64
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
