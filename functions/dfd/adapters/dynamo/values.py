"""DynamoDB attribute values <-> Python values: `{"S": "a"}` <-> `"a"`, `{"N": "3"}` <-> `3`, and so on.

boto3's TypeSerializer/TypeDeserializer do the same, but importing them imports the boto3 package (and s3transfer
with it) into every function's cold start, for conversions the functions' botocore clients do not otherwise
need (docs/performance.md, target 7). This is the same mapping, with one difference on reads: numbers come back as
`int` (or `float` when not integral), not `Decimal` — what the codec's records hold. tests/unit/test_values.py
checks both directions against boto3's.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from decimal import Decimal
from typing import Any

_MAX_DIGITS = 38  # DynamoDB's number precision (boto3 counts trailing zeros too: so does this)


def serialize(value: Any) -> dict[str, Any]:
    """The attribute value of `value`: None, bool, int, Decimal, str, bytes, a list or tuple, a mapping with string
    keys, or a non-empty set of strings, numbers or bytes. TypeError for anything else (floats included, as boto3:
    a float is not exact)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | Decimal):
        return {"N": _number(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, list | tuple):
        return {"L": [serialize(v) for v in value]}
    if isinstance(value, Mapping):
        return {"M": {_key(k): serialize(v) for k, v in value.items()}}
    if isinstance(value, Set) and value:
        if all(isinstance(v, str) for v in value):
            return {"SS": list(value)}
        if all(isinstance(v, int | Decimal) and not isinstance(v, bool) for v in value):
            return {"NS": [_number(v) for v in value]}
        if all(isinstance(v, bytes | bytearray) for v in value):
            return {"BS": [bytes(v) for v in value]}
    raise TypeError(f"no DynamoDB attribute value for {type(value).__name__}: {value!r:.60}")


def deserialize(attr: Mapping[str, Any]) -> Any:
    """The Python value of an attribute value (numbers: int, or float when not integral). TypeError when it is
    not one."""
    if not isinstance(attr, Mapping) or len(attr) != 1:
        raise TypeError(f"not a DynamoDB attribute value: {attr!r:.60}")
    [(kind, raw)] = attr.items()
    if kind == "S":
        return str(raw)
    if kind == "N":
        return _parse_number(raw)
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: deserialize(v) for k, v in raw.items()}
    if kind == "L":
        return [deserialize(v) for v in raw]
    if kind == "B":
        return bytes(raw)
    if kind == "SS":
        return {str(v) for v in raw}
    if kind == "NS":
        return {_parse_number(v) for v in raw}
    if kind == "BS":
        return {bytes(v) for v in raw}
    raise TypeError(f"unknown DynamoDB attribute type {kind!r}")


def _number(value: int | Decimal) -> str:
    number = Decimal(value)
    if not number.is_finite() or len(number.as_tuple().digits) > _MAX_DIGITS:
        raise TypeError(f"not a DynamoDB number (finite, at most {_MAX_DIGITS} digits): {value}")
    return str(value)


def _parse_number(raw: str) -> int | float:
    number = Decimal(raw)
    return int(number) if number == number.to_integral_value() else float(number)


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"a DynamoDB map's keys are strings, not {type(key).__name__}")
    return key
