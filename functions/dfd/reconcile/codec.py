"""The reconcile's lease item (one item of the counters table) <-> its record (dfd.core.codec: what an item is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dfd.core.codec import Item, parse
from dfd.core.records import Lease

LEASE_ID = "lease#reconcile"


def lease(item: Mapping[str, Any] | None) -> Lease:
    return parse(Lease, item or {})


def lease_key() -> Item:
    """The reconcile's lease: one item in the counters table (stats read the shard keys only)."""
    return {"counter_id": LEASE_ID}
