"""Items <-> records, the part every feature shares: an item is what DynamoDB holds, as Python values (the adapter
turns attribute values into these and back: dfd.adapters.dynamo.codec); :func:`parse` makes a record of an item of
any kind, each feature's codec names its kinds (dfd.uploads.codec, dfd.ingest.codec, dfd.reconcile.codec). Here:
the usage shards (the tenant view's table) and the counters' shards, which several features write. Readers accept
any item of their kind the product writes and ignore attributes the domain does not need (index keys, TTLs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from dfd.core.records import CounterShard, TenantUsage, UploadStatus, UploadVia
from dfd.core.usage import USAGE_SHARDS, UsageShard

Item = dict[str, Any]


R = TypeVar("R")


# how an attribute's value becomes a record field's, by the field's annotation
_COERCE: dict[str, Callable[[Any], Any]] = {
    "str": str,
    "str | None": str,
    "int": int,
    "int | None": int,
    "bool": bool,
    "UploadStatus": UploadStatus,
    "UploadStatus | None": UploadStatus,
    "UploadVia | None": UploadVia,
}


def parse(kind: type[R], item: Mapping[str, Any], **derived: Any) -> R:
    """The record of an item: each field from the attribute of its name (absent: the field's default), except
    `derived` ones."""
    values = dict(derived)
    for spec in fields(kind):  # type: ignore[arg-type]
        raw = item.get(spec.name)
        if spec.name not in derived and raw is not None:
            values[spec.name] = _COERCE[str(spec.type)](raw)
    return kind(**values)


def optional(value: Any) -> str | None:
    return None if value is None else str(value)


# A usage shard is an item of the tenant view's table: (tenant, "u#NNN"), beside the tenant's references (whose
# sort key is a SHA-256 in hex, which never holds a `#`), so a tenant's shards are one item collection read by one
# Query. Its counts have one-letter attribute names and pending_bytes is not stored (every write keeps used =
# pending + stored on each shard, so it is used - stored): 200 items stay under 16 KB (docs/design/cost.md, "Quota
# and GET /me").
USAGE_PREFIX = "u#"


USAGE_ATTRS = {"pending_count": "c", "stored_bytes": "s", "used_bytes": "u"}


def tenant_usage(item: Mapping[str, Any] | None) -> TenantUsage:
    """The counts of a usage shard's item (zeros: no item)."""
    found = item or {}
    counts = {name: int(found.get(attr, 0)) for name, attr in USAGE_ATTRS.items()}
    return TenantUsage(**counts, pending_bytes=counts["used_bytes"] - counts["stored_bytes"])


def usage_shard(item: Mapping[str, Any]) -> UsageShard | None:
    """The usage shard an item of the tenant view's table is (None: a tenant's reference)."""
    tenant, sort = str(item.get("tenant", "")), str(item.get("hash", ""))
    index = sort.removeprefix(USAGE_PREFIX)
    if not tenant or not sort.startswith(USAGE_PREFIX) or not (index.isdigit() and int(index) < USAGE_SHARDS):
        return None
    shard = UsageShard(tenant, int(index))
    return shard if usage_key(shard) == {"tenant": tenant, "hash": sort} else None


def is_usage(item: Mapping[str, Any]) -> bool:
    """An item of the tenant view's table that is a usage shard, not a reference."""
    return str(item.get("hash", "")).startswith(USAGE_PREFIX)


def usage_key(shard: UsageShard) -> Item:
    """A usage shard's key in the tenant view's table: the tenant's item collection, sort key u#NNN."""
    return {"tenant": shard.tenant, "hash": f"{USAGE_PREFIX}{shard.index:03d}"}


def counter_shard(item: Mapping[str, Any]) -> CounterShard:
    return parse(CounterShard, item)
