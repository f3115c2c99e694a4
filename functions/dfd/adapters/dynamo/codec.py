"""DynamoDB's attribute values <-> the items the features' codecs read and build (dfd.core.codec, dfd.uploads.codec,
dfd.ingest.codec, dfd.reconcile.codec: the one place each kind of item is parsed and written whole), and the
update of the tenants' precheck counts, which other adapters write too (dfd.adapters.limits)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dfd.adapters.dynamo.values import deserialize, serialize
from dfd.uploads.codec import precheck_key

if TYPE_CHECKING:
    from dfd.core.codec import Item


def to_attr(value: Any) -> dict[str, Any]:
    return serialize(value)


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: to_attr(v) for k, v in values.items() if v is not None}


def from_item(raw: Mapping[str, Any]) -> Item:
    return {key: deserialize(attr) for key, attr in raw.items()}


def precheck_update(tenant: str, expression: str, condition: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The Update (less its table) of the tenant's precheck count: `expression` and `condition` name its window
    `#w` and its count `#n`; `values`: theirs, as Python values."""
    return {
        "Key": to_item(precheck_key(tenant)),
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#w": "precheck_window", "#n": "prechecks"},
        "ExpressionAttributeValues": {name: to_attr(value) for name, value in values.items()},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
