"""Usage shards: their keys, where writes go, their size, and the sum (dfd.core.usage)."""

from __future__ import annotations

import random

import pytest

from dfd.adapters.dynamo import codec
from dfd.core import codec as core_codec
from dfd.core.config import Settings
from dfd.core.records import TenantUsage
from dfd.core.usage import USAGE_SHARDS, every_shard, gate, limited, total, write_shard

BASE = {
    "files_table": "f", "counters_table": "c", "uploads_table": "u", "events_table": "e",
    "tenant_files_table": "t", "bucket": "b",
}  # fmt: skip


def test_keys_round_trip_in_the_tenants_item_collection_and_the_gate_is_shard_0() -> None:
    assert core_codec.usage_key(gate("acme")) == {"tenant": "acme", "hash": "u#000"}
    keys = [core_codec.usage_key(shard) for shard in every_shard("user:abc-1")]
    assert len({key["hash"] for key in keys}) == USAGE_SHARDS
    assert {key["tenant"] for key in keys} == {"user:abc-1"}
    assert keys[7] == {"tenant": "user:abc-1", "hash": "u#007"}
    assert [core_codec.usage_shard(key) for key in keys] == every_shard("user:abc-1")
    assert all(core_codec.is_usage(key) for key in keys)


@pytest.mark.parametrize("other", ["a" * 64, "0" * 64, "u#", "u#x", "u#7", "u#0000", "u#200", "usage#000"])
def test_references_and_other_sort_keys_are_no_usage_shard(other: str) -> None:
    assert core_codec.usage_shard({"tenant": "acme", "hash": other}) is None
    assert core_codec.is_usage({"tenant": "acme", "hash": other}) == other.startswith("u#")


def test_every_shard_of_a_long_tenant_with_large_counts_is_read_by_one_query_of_at_most_16_kb() -> None:
    """GET /me reads the collection eventually consistent: <= 16 KB is <= 2 read units (4 KB blocks, half a unit
    each), whatever the shard count; the personal tenant's name (user:<uuid>) is 41 characters."""
    from dfdbench.cost import item_size

    tenant = "user:" + "0" * 36
    big = 7 * 10**12  # 7 TB on one shard
    counts = {"pending_count": 99, "stored_bytes": big, "used_bytes": 2 * big}
    items = [
        codec.to_item(core_codec.usage_key(shard) | {core_codec.USAGE_ATTRS[name]: n for name, n in counts.items()})
        for shard in every_shard(tenant)
    ]
    assert sum(item_size(item) for item in items) <= 16 * 1024


def test_writes_spread_without_a_limit_and_go_to_the_gate_with_one() -> None:
    rng = random.Random(1)
    free = Settings(**BASE)
    assert not limited(free)
    assert len({write_shard("acme", free, rng).index for _ in range(400)}) > USAGE_SHARDS // 2
    for capped in (Settings(**BASE, tenant_quota_bytes=10), Settings(**BASE, tenant_pending_limit=2)):
        assert limited(capped)
        assert {write_shard("acme", capped, rng) for _ in range(50)} == {gate("acme")}


def test_total_sums_every_field_and_reads_absent_items_as_zero() -> None:
    items = [{"c": 1, "u": 5}, None, {"s": 7, "u": 7}]
    usages = [core_codec.tenant_usage(item) for item in items]
    assert total(usages) == TenantUsage(pending_count=1, pending_bytes=5, stored_bytes=7, used_bytes=12)
