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
    "text", ["", "abc", "1.2.3", "5 Gi", "Gi", "1GiB", "1e", "--1", "1e999", "0x10", "1K"]
)
def test_garbage_is_a_clear_error(text: str) -> None:
    with pytest.raises(QuantityError, match=r"is not a Kubernetes quantity|out of range"):
        parse_quantity(text)


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
