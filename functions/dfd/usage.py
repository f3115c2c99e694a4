"""A tenant's quota usage spread over usage shards (docs/design.md, "Quotas").

A tenant's usage is the sum of up to USAGE_SHARDS items in the counters table: `usage#<tenant>` (shard 0, the
gate) and `usage#<tenant>#NNN`. Without a quota every write (a registration, an ingest's move, a release) adds to a
random shard, so one tenant's traffic spreads like the global counters'. With a quota (TenantQuotaBytes or
TenantPendingLimit set) every write goes to the gate, and a registration's conditional ADD on the gate counts what
the other shards hold (which nobody writes meanwhile): the limit holds exactly. `#` never occurs in a tenant name;
`usage#...` never collides with a counter shard (`shard#NNN`) or an audit scratch item (`audit#<uuid>`), and stats
and the audits sum COUNTER_FIELDS, which usage items do not have.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dfd.config import Settings
from dfd.records import USAGE_FIELDS, TenantUsage

Item = dict[str, Any]

USAGE_SHARDS = 200  # ~30 transactions/s each at 15 % conflicts: one tenant at 5,000 ingests/s + 1,000 registrations/s
READ_BATCH = 100  # keys per BatchGetItem
PREFIX = "usage#"


@dataclass(frozen=True, slots=True)
class UsageShard:
    tenant: str
    index: int

    @property
    def counter_id(self) -> str:
        return f"{PREFIX}{self.tenant}" if self.index == 0 else f"{PREFIX}{self.tenant}#{self.index:03d}"

    @property
    def key(self) -> Item:
        return {"counter_id": self.counter_id}

    @classmethod
    def parse(cls, counter_id: str) -> UsageShard | None:
        """The shard a counters-table id names (None: not a usage item)."""
        if not counter_id.startswith(PREFIX):
            return None
        tenant, _, index = counter_id.removeprefix(PREFIX).partition("#")
        if not tenant or (index and not (index.isdigit() and 0 < int(index) < USAGE_SHARDS)):
            return None
        shard = cls(tenant, int(index or 0))
        return shard if shard.counter_id == counter_id else None


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


def total(items: Iterable[Item | None]) -> TenantUsage:
    """The sum of usage items (absent ones are zeros)."""
    sums = dict.fromkeys(USAGE_FIELDS, 0)
    for item in items:
        for name in USAGE_FIELDS:
            sums[name] += int((item or {}).get(name, 0))
    return TenantUsage(**sums)
