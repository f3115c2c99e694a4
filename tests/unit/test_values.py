"""dfd's DynamoDB attribute values against boto3's TypeSerializer/TypeDeserializer, the mapping they stand in for."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from dfd.adapters.dynamo.values import deserialize, serialize

SAME_AS_BOTO3: list[Any] = [
    "",
    "héllo",
    0,
    -7,
    2**63,
    10**37,
    Decimal("1.50"),
    Decimal("-0.001"),
    True,
    False,
    None,
    b"\x00\xff",
    bytearray(b"ab"),
    [1, "a", None, [True]],
    ("x", 2),
    {"a": 1, "b": {"c": ["d"]}, "e": None},
    {"x", "y"},
    {1, 2, Decimal("3.5")},
    {b"a", b"b"},
]


# ids that do not depend on a set's order (each xdist worker collects the same tests)
IDS = [f"{i}-{type(v).__name__}" for i, v in enumerate(SAME_AS_BOTO3)]


def _sets_as_sorted(attr: Any) -> Any:
    if isinstance(attr, dict):
        return {k: sorted(v) if k in ("SS", "NS", "BS") else _sets_as_sorted(v) for k, v in attr.items()}
    if isinstance(attr, list):
        return [_sets_as_sorted(v) for v in attr]
    return attr


@pytest.mark.parametrize("value", SAME_AS_BOTO3, ids=IDS)
def test_serialize_as_boto3(value: Any) -> None:
    assert _sets_as_sorted(serialize(value)) == _sets_as_sorted(TypeSerializer().serialize(value))


def _plain(value: Any) -> Any:
    """boto3's reading with its Decimals as the codec wants them (int, or float when not integral), and its
    Binary as bytes."""
    if isinstance(value, Binary):
        return bytes(value.value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


@pytest.mark.parametrize("value", SAME_AS_BOTO3, ids=IDS)
def test_deserialize_as_boto3_with_plain_numbers(value: Any) -> None:
    attr = TypeSerializer().serialize(value)
    read = deserialize(attr)
    expected = _plain(TypeDeserializer().deserialize(attr))
    assert read == expected
    assert type(read) is type(expected)


def test_numbers_read_as_int_or_float() -> None:
    assert deserialize({"N": "42"}) == 42 and isinstance(deserialize({"N": "42"}), int)
    assert deserialize({"N": "1E+2"}) == 100 and isinstance(deserialize({"N": "1E+2"}), int)
    assert deserialize({"N": "2.5"}) == 2.5
    assert deserialize({"M": {"n": {"N": "3"}}}) == {"n": 3}


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        float("nan"),
        Decimal("NaN"),
        Decimal("Infinity"),
        10**38 + 1,
        10**40,
        Decimal("1.000000000000000000000000000000000000001"),
        {1: "a"},
        set(),
        {1, "a"},
        object(),
    ],
    ids=lambda v: type(v).__name__,
)
def test_refused(value: Any) -> None:
    """What has no attribute value: a float (not exact), a number of more than 38 digits (trailing zeros
    counted, as boto3)."""
    with pytest.raises(TypeError):
        serialize(value)


@pytest.mark.parametrize("attr", [{}, {"S": "a", "N": "1"}, {"X": "1"}, "S", None], ids=repr)
def test_not_an_attribute_value(attr: Any) -> None:
    with pytest.raises(TypeError):
        deserialize(attr)
