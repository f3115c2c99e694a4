"""Sharded counters under transaction conflicts: a deterministic simulation driving the REAL ingest decision.

N ingesters (threads) each run :class:`dfd.ingest.Ingestor` over their objects. Their S3 and DynamoDB are
fakes that live on a clock of ticks; one tick is the window in which DynamoDB sees two transactions on the
same item as concurrent. Every transaction submitted in a tick is resolved together: in a random order, a
transaction commits unless an item it writes was already written in that tick — then it is cancelled with
TransactionConflict (the ingest sees TransactionRetryable and backs off with its own jittered exponential
backoff, turned into ticks). An ingest that exhausts its attempts fails its delivery; SQS redelivers the
message later (``redelivery_ticks``), and the ingest starts over.

The threads never run at the same time as the scheduler: it advances the clock only when every ingester is
blocked (in a transaction, a sleep, or its read phase), so a run depends on nothing but the seed.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from dfd.adapters.dynamo import Repository
from dfd.config import Settings
from dfd.errors import ServiceUnavailable, TransactionRetryable
from dfd.events import ObjectRef
from dfd.ingest import Ingestor, Outcome
from dfd.ports import IngestState, ObjectInfo, OpenedObject

BUCKET = "sim-bucket"
TICK_SECONDS = 0.005  # the assumed conflict window d (docs/scaling.md): 5 ms


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
        ticks = sorted(self.commit_ticks)
        if len(ticks) < 10:
            return self.commits_per_tick
        first, last = ticks[len(ticks) // 10], ticks[len(ticks) * 9 // 10]
        return (len(ticks) * 8 // 10) / max(last - first, 1)

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
        }


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
    ) -> None:
        self.settings = Settings(
            files_table="files", counters_table="counters", uploads_table="uploads", events_table="events",
            tenant_files_table="tenant_files", bucket=BUCKET, counter_shards=shards,
        )  # fmt: skip
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
            if not update or update["TableName"] != self.settings.counters_table:
                continue
            shard = update["Key"]["counter_id"]["S"]
            names, values = update["ExpressionAttributeNames"], update["ExpressionAttributeValues"]
            with self.cond:
                totals = self.counters.setdefault(shard, {})
                for placeholder, name in names.items():
                    delta = int(values[":" + placeholder[1:]]["N"])
                    totals[name] = totals.get(name, 0) + delta

    # ------------------------------------------------------------------ the ingesters
    def _ingester(self, who: int) -> None:
        rng = random.Random(self.seed * 1000 + who)
        objects = _FakeObjects(self, who, rng)
        ingestor = Ingestor(
            self.settings,
            _FakeRepository(self, who),
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

    # ------------------------------------------------------------------ the clock
    def run(self) -> SimResult:
        threads = [threading.Thread(target=self._ingester, args=(i,), daemon=True) for i in range(self.ingesters)]
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
        self.result.expected = {"total_files": count, "total_uploads": count, "total_bytes_stored": count * 1000}
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
    """Every object is new content with a stored checksum; reading it costs some ticks."""

    def __init__(self, sim: Simulation, who: int, rng: random.Random) -> None:
        self.sim, self.who, self.rng = sim, who, rng

    def open(self, bucket: str, key: str, *, expect_checksum: bool = False) -> OpenedObject:
        self.sim.wait_ticks(self.who, self.rng.randint(*self.sim.read_ticks))  # S3 + the state read
        digest = hashlib.sha256(key.encode()).hexdigest()
        info = ObjectInfo(bucket, key, '"etag"', None, 1000, "application/octet-stream", digest)
        return OpenedObject(info, None)

    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        raise AssertionError("new content is never deleted")


class _FakeRepository(Repository):
    """The real repository's transactions (commit_stored, ...), submitted to the simulation instead of DynamoDB."""

    def __init__(self, sim: Simulation, who: int) -> None:
        super().__init__(None, sim.settings)
        self.sim, self.who = sim, who

    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        return IngestState(None, None, None)

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
