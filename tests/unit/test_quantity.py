from fractions import Fraction

import pytest

from reconciler.domain.quantity import (
    QuantityError,
    format_bytes,
    format_cpu,
    int_value,
    milli_value,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("2Gi", 2 * 2**30),
        ("1.5", Fraction(3, 2)),
        ("1e3", 1000),
        ("1E3", 1000),
        ("500M", 500 * 10**6),
        ("0.5Ki", 512),
        ("1Ki", 1024),
        ("12", 12),
        ("+3k", 3000),
        ("-1", -1),
        (".5", Fraction(1, 2)),
        ("250u", Fraction(250, 10**6)),
        ("7n", Fraction(7, 10**9)),
        ("2e-3", Fraction(2, 1000)),
    ],
)
def test_parse_quantity_exact(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", " ", "abc", "1.2.3", "5 Gi", "1GiB", "1e", "--1", "0x10", "1K", "1e99999999999999999999", "١"],
)
def test_garbage_is_a_clear_error(text: str) -> None:
    """What apimachinery's ParseQuantity refuses (the API server answers 400 for it)."""
    with pytest.raises(QuantityError, match=r"is not a Kubernetes quantity"):
        parse_quantity(text)


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    "text",
    ["1e33", "1E33", "1e999", "8Ei", "9999Ei", "9223372036854775808", "1" + "0" * 5000, "1e4294967329"],
)
def test_values_past_int64_saturate_instead_of_failing(text: str) -> None:
    """The API server accepts and serves `memory: 1e33` (ResourceQuota does not cover DaemonSets);
    as apimachinery's AsScaledInt64, the value saturates. A tenant's pod must never fail a read (issue 28).
    (`1e4294967329`: Go keeps the exponent as an int32, which wraps to 33.)"""
    assert int_value(text) == INT64_MAX
    assert milli_value(text) == INT64_MAX


@pytest.mark.parametrize("text", ["Gi", "Ki", "e3", "m", "-", ".", "0.000"])
def test_an_empty_number_is_zero_as_in_go(text: str) -> None:
    """parseQuantityString reads a missing number as 0, so the server takes these as zero."""
    assert parse_quantity(text) == 0 and int_value(text) == 0 and milli_value(text) == 0


def test_tiny_and_long_values_round_up_exactly() -> None:
    assert milli_value("1e-50") == 1 and int_value("1e-50") == 1  # rounded up, never to nothing
    assert milli_value("1." + "0" * 60) == 1000  # trailing zeros are no excess
    assert milli_value("1." + "0" * 60 + "1") == 1001  # a digit past the 40 kept still rounds up
    assert int_value("1" + "0" * 30 + "e-30") == 1


def test_milli_value_rounds_up_like_kubernetes() -> None:
    assert milli_value("100m") == 100
    assert milli_value("2") == 2000
    assert milli_value("1.5") == 1500
    assert milli_value("0.0001") == 1  # MilliValue rounds up
    assert milli_value("1e3") == 1_000_000


def test_int_value_rounds_up() -> None:
    assert int_value("2Gi") == 2 * 2**30
    assert int_value("0.5Ki") == 512
    assert int_value("100m") == 1  # 0.1 byte is still a byte
    assert int_value("1471840Ki") == 1471840 * 1024
    assert int_value("18181869946") == 18181869946


def test_formatting() -> None:
    assert format_cpu(1500) == "1500m"
    assert format_cpu(2000) == "2"
    assert format_bytes(2 * 2**30) == "2Gi"
    assert format_bytes(1536 * 2**20) == "1.5Gi"


def test_a_long_bad_value_is_quoted_short() -> None:
    """The text may be a tenant's and end up in a plan's warnings: a megabyte is not repeated."""
    with pytest.raises(QuantityError) as raised:
        parse_quantity("x" * 1_000_000)
    assert len(str(raised.value)) < 200 and "(1000000 characters)" in str(raised.value)
