"""A tenant's quota usage spread over usage shards (docs/design.md, "Quotas").

A tenant's usage is the sum of up to USAGE_SHARDS items in one item collection of the tenant view's table (keys
and layout: dfd.core.codec): (tenant, `u#000`) is shard 0, the gate, (tenant, `u#NNN`) the others, beside
the tenant's references (sort key a SHA-256 in hex, never `u#...`), so one Query reads them all. Without a quota
every write (a registration, an ingest's move, a release) adds to a random shard, so one tenant's traffic spreads
like the global counters'. With a quota (TenantQuotaBytes or TenantPendingLimit set) every write goes to the gate,
and a registration's conditional ADD on the gate counts what the other shards hold (read in the same consistent
Query; nobody writes them meanwhile): the limit holds exactly.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfd.core.records import USAGE_FIELDS, TenantUsage

if TYPE_CHECKING:
    from dfd.core.config import Settings

USAGE_SHARDS = 200  # ~30 transactions/s each at 15 % conflicts: one tenant at 5,000 ingests/s + 1,000 registrations/s
READ_BATCH = 100  # keys per BatchGetItem (the reconcile's reads of many items)


@dataclass(frozen=True, slots=True)
class UsageShard:
    """One of a tenant's usage items: `index` 0 is the gate."""

    tenant: str
    index: int


def limited(settings: Settings) -> bool:
    """A limit is set: usage is written to the gate only, and registrations are checked there."""
    return bool(settings.tenant_quota_bytes or settings.tenant_pending_limit)


def gate(tenant: str) -> UsageShard:
    return UsageShard(tenant, 0)


def every_shard(tenant: str) -> list[UsageShard]:
    return [UsageShard(tenant, index) for index in range(USAGE_SHARDS)]


def write_shard(tenant: str, settings: Settings, rng: random.Random) -> UsageShard:
    """Where the next write of this tenant's usage goes."""
    return gate(tenant) if limited(settings) else UsageShard(tenant, rng.randrange(USAGE_SHARDS))


def total(usages: Iterable[TenantUsage]) -> TenantUsage:
    """The sum of usage shards' counts."""
    sums = dict.fromkeys(USAGE_FIELDS, 0)
    for found in usages:
        for name in USAGE_FIELDS:
            sums[name] += getattr(found, name)
    return TenantUsage(**sums)
