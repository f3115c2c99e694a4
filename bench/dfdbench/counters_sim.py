"""Sharded counters under transaction conflicts: a deterministic simulation driving the REAL ingest decision.

N ingesters (threads) each run :class:`dfd.ingest.service.Ingestor` over their objects. Their S3 and DynamoDB are
fakes that live on a clock of ticks; one tick is the window in which DynamoDB sees two transactions on the
same item as concurrent. Every transaction submitted in a tick is resolved together: in a random order, a
transaction commits unless an item it writes was already written in that tick — then it is cancelled with
TransactionConflict (the ingest sees TransactionRetryable and backs off with its own jittered exponential
backoff, turned into ticks). An ingest that exhausts its attempts fails its delivery; SQS redelivers the
message later (``redelivery_ticks``), and the ingest starts over.

The threads never run at the same time as the scheduler: it advances the clock only when every ingester is
blocked (in a transaction, a sleep, or its read phase), so a run depends on nothing but the seed.

With a ``tenant``, every object is an upload of that one tenant (its upload record holds ``quota_bytes``), so each
commit also moves the tenant's usage, and ``registrars`` threads register new uploads of the same tenant through the
REAL ``Repository.register_upload`` (POST /upload's transaction) at the same time: one tenant at full speed, on its
usage shards (no limit set, the template's default) or on its one gate item (``limited``: a quota is set).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dfd.adapters.dynamo import Repository
from dfd.adapters.dynamo.codec import from_item, to_item
from dfd.core import codec as core_codec
from dfd.core import usage
from dfd.core.config import Settings
from dfd.core.errors import ServiceUnavailable, TransactionRetryable
from dfd.core.notifications import ObjectRef
from dfd.core.objects import ObjectInfo, OpenedObject
from dfd.core.records import UploadRecord, UploadStatus
from dfd.ingest.ports import IngestState
from dfd.ingest.service import Ingestor, Outcome
from dfd.uploads.ports import NewUpload

Item = dict[str, Any]

BUCKET = "sim-bucket"
TICK_SECONDS = 0.005  # the assumed conflict window d (docs/scaling.md): 5 ms
SIZE = 1000  # bytes of every simulated object
REGISTER_ATTEMPTS = 8  # a registration refused by a conflict is retried (the client's retry of a 503, or botocore's)


@dataclass
class SimResult:
    shards: int
    ingesters: int
    objects: int
    committed: int = 0
    conflicts: int = 0  # transactions cancelled with TransactionConflict
    failed_deliveries: int = 0  # ingests that gave up after MAX_ATTEMPTS (the queue redelivers them)
    max_attempts: int = 0  # most attempts one delivery needed before it committed
    ticks: int = 0
    totals: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    commit_ticks: list[int] = field(default_factory=list, repr=False)  # the tick of every commit, in order
    usage_items: int = 0  # usage shards of the tenant written
    registered: int = 0  # uploads registered by the registrars (POST /upload's transaction)
    failed_registrations: int = 0  # registrations that gave up after REGISTER_ATTEMPTS (a 503 to the client)
    max_register_attempts: int = 0
    register_ticks: list[int] = field(default_factory=list, repr=False)

    @property
    def exact(self) -> bool:
        return self.totals == self.expected

    @property
    def retries_per_commit(self) -> float:
        return self.conflicts / self.committed if self.committed else math.inf

    @property
    def commits_per_tick(self) -> float:
        return self.committed / self.ticks if self.ticks else 0.0

    @property
    def steady_commits_per_tick(self) -> float:
        """Commits per tick between the 10th and the 90th percentile commit: the rate once every ingester is
        busy, without the ramp-up and the tail of the last stragglers."""
        if len(self.commit_ticks) < 10:
            return self.commits_per_tick
        return _steady(self.commit_ticks)

    @property
    def steady_registrations_per_tick(self) -> float:
        return _steady(self.register_ticks)

    @property
    def conflict_share(self) -> float:
        """Share of transaction attempts cancelled by a conflict (p per attempt)."""
        attempts = self.committed + self.conflicts
        return self.conflicts / attempts if attempts else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "shards": self.shards,
            "ingesters": self.ingesters,
            "objects": self.objects,
            "committed": self.committed,
            "conflicts": self.conflicts,
            "retries_per_commit": round(self.retries_per_commit, 3),
            "conflict_share": round(self.conflict_share, 3),
            "steady_commits_per_tick": round(self.steady_commits_per_tick, 2),
            "failed_deliveries": self.failed_deliveries,
            "max_attempts": self.max_attempts,
            "ticks": self.ticks,
            "exact": self.exact,
            "registered": self.registered,
            "failed_registrations": self.failed_registrations,
            "max_register_attempts": self.max_register_attempts,
            "steady_registrations_per_tick": round(self.steady_registrations_per_tick, 2),
            "totals": self.totals,
        }


def _steady(ticks_of_events: list[int]) -> float:
    """Events per tick between the 10th and the 90th percentile event (the rate without ramp-up and tail)."""
    ticks = sorted(ticks_of_events)
    if len(ticks) < 10:
        return 0.0
    first, last = ticks[len(ticks) // 10], ticks[len(ticks) * 9 // 10]
    return (len(ticks) * 8 // 10) / max(last - first, 1)


class _Wait:
    __slots__ = ("committed", "keys", "kind", "released", "wake")

    def __init__(self, kind: str, wake: int = 0, keys: frozenset[str] = frozenset()) -> None:
        self.kind = kind
        self.wake = wake
        self.keys = keys
        self.released = False
        self.committed = False


class Simulation:
    def __init__(
        self,
        *,
        shards: int,
        ingesters: int = 32,
        objects_per_ingester: int = 16,
        read_ticks: tuple[int, int] = (4, 12),
        redelivery_ticks: int = 400,
        seed: int = 7,
        tenant: str | None = None,
        registrars: int = 0,
        registrations_per_registrar: int = 16,
        register_ticks: tuple[int, int] = (4, 12),
        limited: bool = False,
    ) -> None:
        self.settings = Settings(
            files_table="files", counters_table="counters", uploads_table="uploads", events_table="events",
            tenant_files_table="tenant_files", bucket=BUCKET, counter_shards=shards,
            tenant_quota_bytes=2**50 if limited else 0,
        )  # fmt: skip
        self.tenant = tenant
        self.registrars = registrars if tenant else 0
        self.per_registrar = registrations_per_registrar
        self.register_think = register_ticks
        self.ingesters = ingesters
        self.per_ingester = objects_per_ingester
        self.read_ticks = read_ticks
        self.redelivery_ticks = redelivery_ticks
        self.rng = random.Random(seed)
        self.seed = seed
        self.tick = 0
        self.cond = threading.Condition()
        self.waiting: dict[int, _Wait] = {}
        self.running = 0
        self.counters: dict[str, dict[str, int]] = {}
        self.result = SimResult(shards, ingesters, ingesters * objects_per_ingester)

    # ------------------------------------------------------------------ called by ingester threads
    def _block(self, who: int, wait: _Wait) -> _Wait:
        with self.cond:
            self.waiting[who] = wait
            self.running -= 1
            self.cond.notify_all()
            while not wait.released:
                self.cond.wait()
        return wait

    def sleep(self, who: int, seconds: float) -> None:
        self._block(who, _Wait("sleep", wake=self.tick + max(1, math.ceil(seconds / TICK_SECONDS))))

    def wait_ticks(self, who: int, ticks: int) -> None:
        self._block(who, _Wait("sleep", wake=self.tick + max(1, ticks)))

    def transact(self, who: int, items: list[dict[str, Any]]) -> bool:
        keys = frozenset(_item_key(item) for item in items)
        wait = self._block(who, _Wait("tx", keys=keys))
        if wait.committed:
            self._apply(items)
        return wait.committed

    def _apply(self, items: list[dict[str, Any]]) -> None:
        for item in items:
            update = item.get("Update")
            if not update:
                continue
            if update["TableName"] == self.settings.counters_table:
                shard = update["Key"]["counter_id"]["S"]
            elif update["TableName"] == self.settings.tenant_files_table and core_codec.is_usage(
                from_item(update["Key"])
            ):
                shard = json.dumps(update["Key"], sort_keys=True)  # a usage shard of the tenant
            else:
                continue
            names = update.get("ExpressionAttributeNames", {})
            values = update["ExpressionAttributeValues"]
            adds = update["UpdateExpression"].split("ADD ", 1)[1]
            with self.cond:
                totals = self.counters.setdefault(shard, {})
                for clause in adds.split(","):
                    name, value = clause.split()
                    name = names.get(name, name)
                    totals[name] = totals.get(name, 0) + int(values[value]["N"])

    def usage_items(self) -> list[Item]:
        """The tenant's usage shards as they are now."""
        shards = usage.every_shard(str(self.tenant))
        ids = {json.dumps(to_item(core_codec.usage_key(shard)), sort_keys=True): shard for shard in shards}
        with self.cond:
            return [
                core_codec.usage_key(shard) | self.counters[key] for key, shard in ids.items() if key in self.counters
            ]

    # ------------------------------------------------------------------ the ingesters
    def _ingester(self, who: int) -> None:
        rng = random.Random(self.seed * 1000 + who)
        objects = _FakeObjects(self, who, rng)
        ingestor = Ingestor(
            self.settings,
            _FakeRepository(self, who, rng),
            objects,  # type: ignore[arg-type]
            sleep=lambda seconds: self.sleep(who, seconds),
            rng=rng,
        )
        try:
            for index in range(self.per_ingester):
                ref = ObjectRef(BUCKET, f"uploads/{who:04d}{index:028x}")
                while True:
                    try:
                        result = ingestor.ingest(ref)
                    except ServiceUnavailable:
                        with self.cond:
                            self.result.failed_deliveries += 1
                        self.wait_ticks(who, self.redelivery_ticks)  # back on the queue
                        continue
                    assert result.outcome == Outcome.STORED, result
                    with self.cond:
                        self.result.committed += 1
                        self.result.commit_ticks.append(self.tick)
                        self.result.max_attempts = max(self.result.max_attempts, result.attempts)
                    break
        finally:
            with self.cond:
                self.running -= 1
                self.cond.notify_all()

    def _registrar(self, who: int) -> None:
        """POST /upload for the tenant, one after another: the API's work (think ticks), then its transaction."""
        assert self.tenant is not None
        rng = random.Random(self.seed * 1000 + who)
        repo = _FakeRepository(self, who, rng)
        now = datetime(2026, 1, 1, tzinfo=UTC)
        try:
            for index in range(self.per_registrar):
                upload_id = f"{who:04d}{index:027x}0"
                upload = NewUpload(
                    upload_id, "f.bin", SIZE, "application/octet-stream", None, f"uploads/{upload_id}", BUCKET,
                    now + timedelta(hours=1), owner="owner", tenant=self.tenant,
                )  # fmt: skip
                for attempt in range(1, REGISTER_ATTEMPTS + 1):
                    self.wait_ticks(who, rng.randint(*self.register_think))
                    try:
                        repo.register_upload(upload, now)
                    except TransactionRetryable:
                        self.wait_ticks(who, rng.randint(1, 2**attempt))
                        continue
                    with self.cond:
                        self.result.registered += 1
                        self.result.register_ticks.append(self.tick)
                        self.result.max_register_attempts = max(self.result.max_register_attempts, attempt)
                    break
                else:
                    with self.cond:
                        self.result.failed_registrations += 1
        finally:
            with self.cond:
                self.running -= 1
                self.cond.notify_all()

    # ------------------------------------------------------------------ the clock
    def run(self) -> SimResult:
        threads = [threading.Thread(target=self._ingester, args=(i,), daemon=True) for i in range(self.ingesters)]
        threads += [
            threading.Thread(target=self._registrar, args=(self.ingesters + i,), daemon=True)
            for i in range(self.registrars)
        ]
        with self.cond:
            self.running = len(threads)
        for thread in threads:
            thread.start()
        while True:
            with self.cond:
                while self.running > 0:
                    self.cond.wait()
                if not self.waiting:
                    break
                self._resolve_tick()
        for thread in threads:
            thread.join()
        self.result.ticks = self.tick
        fields = ("total_files", "total_uploads", "total_bytes_stored")
        self.result.totals = {name: sum(c.get(name, 0) for c in self.counters.values()) for name in fields}
        count = self.result.objects
        self.result.expected = {"total_files": count, "total_uploads": count, "total_bytes_stored": count * SIZE}
        if self.tenant is not None:
            shards = [core_codec.tenant_usage(item) for item in self.usage_items()]
            self.result.totals |= {f"usage_{k}": v for k, v in usage.total(shards).as_dict().items()}
            open_uploads = self.result.registered - count  # registered, not ingested (the ingested ones were earlier)
            self.result.expected |= {
                "usage_pending_count": open_uploads,
                "usage_pending_bytes": open_uploads * SIZE,
                "usage_stored_bytes": count * SIZE,
                "usage_used_bytes": self.result.registered * SIZE,
            }
            self.result.usage_items = len(shards)
        return self.result

    def _resolve_tick(self) -> None:
        """Resolve this tick's transactions, advance the clock, wake whoever is due (lock held)."""
        transactions = [(who, wait) for who, wait in sorted(self.waiting.items()) if wait.kind == "tx"]
        self.rng.shuffle(transactions)
        written: set[str] = set()
        for who, wait in transactions:
            if wait.keys & written:
                self.result.conflicts += 1
            else:
                written |= wait.keys
                wait.committed = True
            self._release(who, wait)
        if transactions:
            self.tick += 1
        else:  # nothing to resolve: jump to the next wake-up
            self.tick = max(self.tick + 1, min(w.wake for w in self.waiting.values()))
        for who, wait in list(self.waiting.items()):
            if wait.kind == "sleep" and wait.wake <= self.tick:
                self._release(who, wait)
        self.cond.notify_all()

    def _release(self, who: int, wait: _Wait) -> None:
        wait.released = True
        del self.waiting[who]
        self.running += 1


def _item_key(item: dict[str, Any]) -> str:
    (action,) = item.values()
    key = action.get("Key") or {k: v for k, v in action["Item"].items() if k in ("hash", "event_key", "upload_id")}
    return str(action["TableName"]) + json.dumps(key, sort_keys=True)


class _FakeObjects:
    """Every object is new content (1000 bytes of its own, put straight into the bucket: hashed by the ingest);
    reading it costs some ticks."""

    def __init__(self, sim: Simulation, who: int, rng: random.Random) -> None:
        self.sim, self.who, self.rng = sim, who, rng

    def open(self, bucket: str, key: str, *, expect_checksum: bool = False) -> OpenedObject:
        self.sim.wait_ticks(self.who, self.rng.randint(*self.sim.read_ticks))  # S3 + the state read
        info = ObjectInfo(bucket, key, '"etag"', None, SIZE, "application/octet-stream", None)
        return OpenedObject(info, None)

    def stream(self, opened: OpenedObject, sink: Callable[[memoryview], None]) -> int:
        data = (hashlib.sha256(opened.info.key.encode()).digest() * 32)[: opened.info.size]
        sink(memoryview(data))
        return len(data)

    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        raise AssertionError("new content is never deleted")


class _FakeRepository(Repository):
    """The real repository's transactions (commit_stored, ...), submitted to the simulation instead of DynamoDB."""

    def __init__(self, sim: Simulation, who: int, rng: random.Random) -> None:
        super().__init__(None, sim.settings, rng=rng)
        self.sim, self.who = sim, who

    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        if self.sim.tenant is None or upload_id is None:
            return IngestState(None, None, None)
        # an upload of the tenant, registered earlier (its registration is not part of this run's load)
        upload = UploadRecord(upload_id, UploadStatus.PENDING, tenant=self.sim.tenant, quota_bytes=SIZE)
        return IngestState(None, None, upload)

    def _usage_items(self, kwargs: dict[str, Any]) -> list[Item]:
        """Only the tenant's usage shards are read (a registration with a limit set): as they are now."""
        return self.sim.usage_items()

    def transact(self, items: list[dict[str, Any]]) -> None:
        if not self.sim.transact(self.who, items):
            raise TransactionRetryable("DynamoDB TransactWriteItems cancelled: ['TransactionConflict']")


def compare(ingesters: int = 32, objects_per_ingester: int = 16, seed: int = 7) -> dict[int, SimResult]:
    """The same load on one counter item and on 16 shards."""
    return {
        shards: Simulation(
            shards=shards, ingesters=ingesters, objects_per_ingester=objects_per_ingester, seed=seed
        ).run()
        for shards in (1, 16)
    }
