"""The reconcile: what makes the system converge when notifications are lost, uploads abandoned, contents deleted
or counters drift (statemachine/README.md tells the whole run).

A run is a sequence of phases — pending uploads, the reaper of contents, the reaper of tenant references, and on
sweep runs the orphan objects and the files (lost copies and the counter audit) — each processed one bounded page
per call: a call takes the run's state (JSON: it travels through the Step Functions workflow, which only loops),
does one page and returns the state with its cursor moved on. One run at a time: the run holds a lease, taken by
:meth:`Reconciler.begin`, renewed by every page and released by :meth:`Reconciler.finish`.

Errors are what they are: an object gone (404) or changed (412) and a write whose condition fails (someone else
won) are answers; anything else raises and fails the run, which the workflow's failure alarm reports.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from dfd.core import clock
from dfd.core.ids import event_key, upload_id_from_key, version_token
from dfd.core.notifications import notification_body
from dfd.core.records import FileRecord, TenantRef, UploadRecord, UploadStatus
from dfd.history.service import snapshot_mismatches
from dfd.identity.s3access import ROOT as DROP_ROOT
from dfd.identity.s3access import parse_key
from dfd.reconcile import inventory
from dfd.reconcile.audit import Recount, proven_drift

if TYPE_CHECKING:
    from dfd.core.config import Settings
    from dfd.core.objects import ListedObject, ObjectStore
    from dfd.ingest.ports import ProgressReads
    from dfd.reconcile.ports import Cursor, IngestQueue, ReconcileStore

T = TypeVar("T")
# a metric the run emits: name, value, unit (the handler hands them to Powertools Metrics)
Emit = Callable[[str, float, str], None]

PHASES = ("pending", "reap", "references", "orphans", "files", "done")
SWEEP_PHASES = ("orphans", "files")
SKIPPED = "another reconcile run is in progress"
# Items per page: a page is one Lambda call, well inside its timeout (a pending upload or a reaped content
# costs 2-4 requests, a listed object a share of two BatchGetItems, a file record at most one HeadObject).
PAGE = {"pending": 100, "reap": 100, "references": 200, "orphans": 1000, "files": 1000}
DEFAULT_BUDGET = 500  # pages per execution, ~10 history events each: far below the 25,000-event quota
LEASE_SECONDS = 900  # renewed by every page: a run that dies frees it this long after its last page
# objects and records checked at once within a page (their requests are independent): botocore's default pool
# of 10 connections per client (dfd.adapters.aws's S3 client), so no request waits for a connection
WORKERS = 10
# an inventory report older than this at the run's now is not used (S3 writes one a day; a report missed or late
# leaves the check to one HeadObject per content rather than to a stale listing)
INVENTORY_MAX_AGE_SECONDS = 2 * 24 * 3600
INVENTORY_LISTING = 1000  # keys per ListObjectsV2 page of the reports' prefix
# a pending upload's object hashed across invocations whose last state is older than this is re-driven (its
# execution may have died: the ingest's hand-off restarts it); a segment writes one at least every ~15 minutes,
# its retries back off for up to ~40 more (statemachine/segments.asl.json)
HASHING_STALE_SECONDS = 3600


@dataclass
class Run:
    id: str  # the lease's holder: one per run, carried by its continuations
    now: str  # the run's notion of now (tests and demos move it forward)
    sweep: bool
    budget: int  # pages per execution before the run continues in a new one
    started: str  # when the run took its lease (the wall clock: a completed sweep is noted at this time)


@dataclass
class Position:
    phase: str = "pending"
    shard: int = 0
    cursor: Cursor | str | None = None
    pages: int = 0  # pages this execution ran

    @property
    def table_cursor(self) -> Cursor | None:
        """Where a DynamoDB page resumes (the orphans phase keeps S3's continuation token instead)."""
        return self.cursor if isinstance(self.cursor, dict) else None

    @property
    def list_token(self) -> str | None:
        """Where the orphans phase's S3 listing resumes."""
        return self.cursor if isinstance(self.cursor, str) else None


@dataclass
class Tally:
    redriven: int = 0
    expired: int = 0
    failed: int = 0
    reaped: int = 0
    refs_reaped: int = 0
    orphans: int = 0
    lost: int = 0
    recount: dict[str, int] = field(default_factory=dict)  # the files phase's Recount so far
    before: dict[str, int] | None = None  # the counters read before the recount started
    inventory: str | None = None  # the inventory report's manifest the files phase reads ("": none)
    # what the latest snapshot of the counters' history got wrong (at most 20; None: no snapshot checked)
    snapshot: list[str] | None = None


@dataclass
class State:
    run: Run
    pos: Position = field(default_factory=Position)
    tally: Tally = field(default_factory=Tally)
    drift: dict[str, int] | None = None
    generation: int = 0  # executions before this one

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> State:
        try:
            return cls(
                Run(**raw["run"]),
                Position(**raw["pos"]),
                Tally(**raw["tally"]),
                raw.get("drift"),
                int(raw.get("generation", 0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ReconcileInputError(f"not a reconcile state: {error}") from None


class ReconcileInputError(ValueError):
    """An execution's input, or a step's payload, that is not this workflow's: the step fails, never retried."""


def summary(state: State) -> dict[str, Any]:
    """What a run reports (scripts/reconcile prints it): orphans and drift are None when not swept."""
    tally, swept = state.tally, state.run.sweep
    return {
        "redriven": tally.redriven,
        "expired": tally.expired,
        "failed": tally.failed,
        "reaped": tally.reaped,
        "refs_reaped": tally.refs_reaped,
        "orphans": tally.orphans if swept else None,
        "drift": state.drift if swept else None,
        "snapshot": tally.snapshot if swept else None,
        "now": state.run.now,
        "executions": state.generation + 1,
    }


def next_phase(phase: str, sweep: bool) -> str:
    following = PHASES[PHASES.index(phase) + 1]
    return following if sweep or following not in SWEEP_PHASES else "done"


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        repo: ReconcileStore,
        store: ObjectStore,
        queue: IngestQueue,
        *,
        workers: int = WORKERS,
        wall: Callable[[], datetime] = clock.now,
        rng: random.Random | None = None,
        hashing: tuple[int, ProgressReads] | None = None,
    ) -> None:
        """`hashing`: the segment threshold and the hashing progress of objects above it (None: every object is
        hashed inline): a pending upload whose object is being hashed is not re-driven."""
        self._s = settings
        self._hashing = hashing
        self._repo = repo
        self._store = store
        self._queue = queue
        self._workers = workers
        self._wall = wall
        self._rng = rng or random.Random()
        self._report: inventory.Report | None = None  # the last report read: pages of a run share it

    # ------------------------------------------------------------------------------------------ the run
    def begin(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """A run's first call: its state, or ``{"skipped": ...}`` when another run holds the lease (a sweep asked
        for is then noted as due: the next run sweeps). `given` is the execution's input: ``sweep``, ``now``,
        ``budget``, or ``state`` for a continuation, which carries on with the run's lease."""
        wall = self._wall()
        if "state" in given:
            state = State.from_json(given["state"])
            self._repo.renew_lease(state.run.id, clock.plus(wall, seconds=LEASE_SECONDS))
            state.generation += 1
            state.pos.pages = 0
            return state.to_json()
        sweep, now, budget = _run_input(given)
        run_id = uuid.uuid4().hex
        lease = self._repo.take_lease(run_id, wall, clock.plus(wall, seconds=LEASE_SECONDS))
        if lease.holder != run_id:
            if sweep:
                self._repo.note_sweep_due(wall)
            return {"skipped": SKIPPED, "executions": 1}
        run = Run(run_id, now or clock.iso(wall), sweep or lease.sweep_due, budget, clock.iso(wall))
        return State(run).to_json()

    def page(self, phase: str, raw: Mapping[str, Any], emit: Emit) -> dict[str, Any]:
        """One page of `phase` (the state's own): the state moved on, to the phase's next page or the next phase."""
        state = State.from_json(raw)
        if phase != state.pos.phase or phase not in PAGE:
            raise ReconcileInputError(f"the run is in phase {state.pos.phase!r}, not {phase!r}")
        self._repo.renew_lease(state.run.id, clock.plus(self._wall(), seconds=LEASE_SECONDS))
        now = clock.parse(state.run.now)
        pass_ = {
            "pending": self._pending,
            "reap": self._reap,
            "references": self._references,
            "orphans": self._orphans,
            "files": self._files,
        }[phase]
        pass_(state, now, emit)
        state.pos.pages += 1
        return state.to_json()

    def finish(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The run's last call: the lease released (a completed sweep noted) and the run's summary."""
        state = State.from_json(raw)
        swept = clock.parse(state.run.started) if state.run.sweep else None
        self._repo.release_lease(state.run.id, swept_at=swept)
        return summary(state)

    def abandon(self, raw: Mapping[str, Any]) -> None:
        """A failed run frees its lease at once (its failure is the execution's: the alarm reports it)."""
        self._repo.release_lease(State.from_json(raw).run.id)

    # ------------------------------------------------------------------------------------------ phases
    def _advance(self, state: State, following: Cursor | str | None, *, sharded: bool) -> None:
        """The next page of this shard, else the next shard's first (sharded indexes), else the next phase."""
        pos = state.pos
        if following is not None:
            pos.cursor = following
            return
        pos.cursor = None
        if sharded and pos.shard + 1 < self._s.pending_shards:
            pos.shard += 1
            return
        pos.shard = 0
        pos.phase = next_phase(pos.phase, state.run.sweep)

    def _pending(self, state: State, now: datetime, emit: Emit) -> None:
        cursor = state.pos.table_cursor
        uploads, following = self._repo.due_uploads(state.pos.shard, now, PAGE["pending"], cursor)
        outcomes = Counter(self._each(uploads, lambda upload: self._settle(upload, now)))
        state.tally.redriven += outcomes["redriven"]
        state.tally.expired += outcomes["expired"]
        state.tally.failed += outcomes["failed"]
        self._advance(state, following, sharded=True)

    def _settle(self, upload: UploadRecord, now: datetime) -> str | None:
        """A pending upload past its grace period: its object there -> its notification re-driven (or, re-driven
        too often already, the upload failed); no object and its URL expired -> expired (its S3 multipart upload
        aborted first); no object yet -> nothing (the client may still upload)."""
        bucket, key = self._s.bucket, upload.s3_key
        if key is None:
            return None
        if self._store.exists(bucket, key, None):
            if self._being_hashed(upload, key, now):
                return None  # its segments move on: not lost (a stale one is re-driven: the hand-off restarts it)
            count = self._repo.count_redrive(upload.upload_id, now)
            if count is None:
                return None  # processed meanwhile
            limit = self._s.reconcile_max_redrives
            if count > limit:
                why = f"the object was re-driven {limit} times and never ingested: see the ingest DLQ and logs"
                gave_up = self._repo.give_up_upload(
                    upload, UploadStatus.FAILED, now, counter_shard=self._counter_shard(), failure=why
                )
                return "failed" if gave_up else None
            self._queue.send(notification_body(bucket, key, clock.iso(now)))
            return "redriven"
        if upload.expires_at is None or upload.expires_at >= clock.iso(now):
            return None
        if upload.s3_upload_id:
            self._store.abort_multipart(bucket, key, upload.s3_upload_id)
        expired = self._repo.give_up_upload(upload, UploadStatus.EXPIRED, now, counter_shard=self._counter_shard())
        return "expired" if expired else None

    def _being_hashed(self, upload: UploadRecord, key: str, now: datetime) -> bool:
        """Whether the upload's object is hashed across invocations and its last state landed within
        HASHING_STALE_SECONDS (only an upload above the segment threshold is looked up: one GetItem)."""
        if self._hashing is None or upload.size is None or upload.size <= self._hashing[0]:
            return False
        shown = self._hashing[1].hashing_of_key(self._s.bucket, key)
        if shown is None or shown.hashed >= shown.size or shown.updated_at is None:
            return False
        return shown.updated_at >= clock.iso(now - timedelta(seconds=HASHING_STALE_SECONDS))

    def _reap(self, state: State, now: datetime, emit: Emit) -> None:
        cursor = state.pos.table_cursor
        files, following = self._repo.due_contents(state.pos.shard, now, PAGE["reap"], cursor)
        state.tally.reaped += sum(1 for outcome in self._each(files, self._reap_one) if outcome)
        self._advance(state, following, sharded=True)

    def _reap_one(self, file: FileRecord) -> bool:
        """A content marked by a delete, its grace over: a resurrected one's older object deleted and forgotten;
        then, tombstoned, its object and record deleted (True), or, counted again, out of the reaper's index. An
        object changed at its key (412) is left alone, and so is the content: it stays in the index."""
        bucket = file.bucket or self._s.bucket
        if file.reap_key:
            if not self._store.delete(bucket, file.reap_key, file.reap_etag):
                return False
            self._repo.forget_older_generation(file)
        if not file.tombstoned:
            self._repo.unindex_content(file)
            return False
        if file.s3_key and not self._store.delete(bucket, file.s3_key, file.etag):
            return False
        return self._repo.reap_content(file, counter_shard=self._counter_shard())

    def _counter_shard(self) -> int:
        """The counter shard a count of this run goes to (spread as every writer spreads them)."""
        return self._rng.randrange(self._s.counter_shards)

    def _references(self, state: State, now: datetime, emit: Emit) -> None:
        cursor = state.pos.table_cursor
        refs, following = self._repo.due_references(state.pos.shard, now, PAGE["references"], cursor)
        state.tally.refs_reaped += sum(1 for outcome in self._each(refs, self._reap_reference) if outcome)
        self._advance(state, following, sharded=True)

    def _reap_reference(self, ref: TenantRef) -> bool:
        """A reference a delete marked: at 0, deleted with its size released (True); counted again, unindexed."""
        if ref.holds:
            self._repo.unindex_reference(ref)
            return False
        return self._repo.reap_reference(ref)

    def _orphans(self, state: State, now: datetime, emit: Emit) -> None:
        """The upload prefix's listing (shard 0), then the drop zone's (shard 1: s3/)."""
        token = state.pos.list_token
        bucket = self._s.bucket
        drops = state.pos.shard == 1
        prefix = DROP_ROOT if drops else self._s.upload_prefix
        objects, following = self._store.list_objects(bucket, prefix, PAGE["orphans"], token)
        orphans = self.drops(objects) if drops else self.orphans(objects)
        for obj in orphans:
            self._queue.send(notification_body(bucket, obj.key, clock.iso(now)))
        state.tally.orphans += len(orphans)
        if following is None and not drops:
            state.pos.cursor, state.pos.shard = None, 1
            return
        self._advance(state, following, sharded=False)

    @staticmethod
    def drops(objects: Iterable[ListedObject]) -> list[ListedObject]:
        """The listed drop-zone objects to re-drive: every one under a caller's prefix, folder markers and the
        prefix itself included (the ingest rejects those). The drop zone keeps nothing (dfd.ingest.dropzone): an
        object still there is in flight, or left by an ingest that stopped between two steps — its event again
        finishes it (and changes nothing more when it was finished)."""
        return [obj for obj in objects if parse_key(obj.key + "x") is not None]  # dfd.ingest.dropzone.drop_key

    def orphans(self, objects: Iterable[ListedObject]) -> list[ListedObject]:
        """The listed objects to re-drive: those never ingested (no event record) that no upload owns as pending,
        processed or failed, and the leftover bytes of an ingest that deleted them (a `duplicate` whose key holds
        no adopted copy, a `rejected` one). Folder markers are never ingested."""
        bucket, prefix = self._s.bucket, self._s.upload_prefix
        objects = [obj for obj in objects if not obj.key.endswith("/")]
        keys = {obj.key: event_key(bucket, obj.key, version_token(None, obj.etag)) for obj in objects}
        events = self._repo.get_events(list(keys.values()))
        unseen = [obj for obj in objects if keys[obj.key] not in events]
        owners = {obj.key: upload_id_from_key(prefix, obj.key) for obj in unseen}
        uploads = self._repo.get_uploads([owner for owner in owners.values() if owner])
        duplicates = [obj.key for obj in objects if (e := events.get(keys[obj.key])) and e.outcome == "duplicate"]
        claims = self._repo.get_claims(bucket, duplicates) if duplicates else {}
        keep = (UploadStatus.PENDING, UploadStatus.STORED, UploadStatus.DUPLICATE, UploadStatus.FAILED)
        found: list[ListedObject] = []
        for obj in objects:
            event = events.get(keys[obj.key])
            if event is not None:
                if event.outcome == "rejected" or (event.outcome == "duplicate" and obj.key not in claims):
                    found.append(obj)
                continue
            upload = uploads.get(owners[obj.key] or "")
            if upload is None or upload.s3_key != obj.key or upload.status not in keep:
                found.append(obj)
        return found

    def _files(self, state: State, now: datetime, emit: Emit) -> None:
        """The audit's recount of the file records, a page at a time between two readings of the counters, and
        the check that each live record's object is there with its ETag (else the record is marked lost)."""
        tally = state.tally
        if tally.before is None:
            tally.before = self._repo.counter_totals(consistent=True)
            tally.inventory = self._newest_report(now)
        report = self._read_report(tally.inventory)
        cursor = state.pos.table_cursor
        files, following = self._repo.scan_files(PAGE["files"], cursor)
        tally.recount = Recount(**tally.recount).add(files).as_dict()
        lost = sum(1 for outcome in self._each(files, lambda file: self._check_copy(file, now, report)) if outcome)
        if lost:
            emit("LostFiles", lost, "Count")
        tally.lost += lost
        if following is None:
            after = self._repo.counter_totals(consistent=True)
            state.drift = {
                "files": proven_drift(tally.before["total_files"], after["total_files"], tally.recount["total_files"]),
                "bytes": proven_drift(
                    tally.before["total_bytes_stored"],
                    after["total_bytes_stored"],
                    tally.recount["total_bytes_stored"],
                ),
            }
            if state.drift["files"] or state.drift["bytes"]:
                emit("CounterDriftDetected", 1, "Count")
                emit("CounterDriftFiles", state.drift["files"], "Count")
                emit("CounterDriftBytes", state.drift["bytes"], "Bytes")
            tally.snapshot = self._check_snapshot(emit)
        self._advance(state, following, sharded=False)

    def _check_snapshot(self, emit: Emit) -> list[str] | None:
        """The latest snapshot of the counters' history against the counters it was taken from
        (dfd.history.service.snapshot_mismatches): what it got wrong, the first 20 (empty: exact; None: no
        history table, or no snapshot yet). The run's summary reports it; SnapshotMismatch counts it."""
        if not self._s.history_table:
            return None
        snapshot = self._repo.latest_snapshot()
        if snapshot is None:
            return None
        wrong = snapshot_mismatches(snapshot, self._repo.counter_shards(consistent=True))
        if wrong:
            emit("SnapshotMismatch", len(wrong), "Count")
        return wrong[:20]

    def _check_copy(self, file: FileRecord, now: datetime, report: inventory.Report | None = None) -> bool:
        """A live content's stored object must be there with its ETag; True when it was not and is now marked
        lost. Tombstoned contents are the reaper's; lost ones are marked already. With an inventory report, a
        version it lists is there (S3 listed it: the check costs nothing), and a record written after S3's
        listing is left to the next report; only the others — candidates for lost — are asked of S3 itself."""
        if not file.live or not file.s3_key:
            return False
        bucket = file.bucket or self._s.bucket
        if report is not None and bucket == self._s.bucket:
            if report.lists(file.s3_key, file.etag):
                return False
            if _written_after(file, report.created):
                return False
        if self._store.exists(bucket, file.s3_key, file.etag):
            return False
        return self._repo.mark_lost(file, now)

    def _newest_report(self, now: datetime) -> str:
        """The manifest of the newest inventory report of the upload prefix no older than
        INVENTORY_MAX_AGE_SECONDS at `now` ("": none, or none configured)."""
        prefix = self._s.inventory_prefix
        if not prefix:
            return ""
        keys: list[str] = []
        token: str | None = None
        while True:
            listed, token = self._store.list_objects(self._s.bucket, prefix, INVENTORY_LISTING, token)
            keys += [obj.key for obj in listed]
            if token is None:
                break
        newest = inventory.newest_manifest(prefix, keys)
        if newest is None:
            return ""
        try:
            manifest = inventory.parse_manifest(newest, self._store.get_bytes(self._s.bucket, newest))
        except inventory.InventoryError:
            return ""  # not a report this check can read: one HeadObject per content, as without one
        if (now - manifest.created).total_seconds() > INVENTORY_MAX_AGE_SECONDS:
            return ""
        return newest

    def _read_report(self, key: str | None) -> inventory.Report | None:
        """The report of that manifest: read once, then kept while pages of the run name it."""
        if not key:
            return None
        if self._report is not None and self._report.manifest.key == key:
            return self._report
        bucket = self._s.bucket
        manifest = inventory.parse_manifest(key, self._store.get_bytes(bucket, key))
        listed: set[int] = set()
        for data_key in manifest.files:
            listed.update(inventory.versions(manifest, self._store.get_bytes(bucket, data_key)))
        self._report = inventory.Report(manifest, frozenset(listed))
        return self._report

    def _each(self, items: list[T], work: Callable[[T], Any]) -> list[Any]:
        """`work` on every item, `workers` at a time; the first exception raised is raised here."""
        if self._workers <= 1 or len(items) <= 1:
            return [work(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self._workers, len(items))) as pool:
            return list(pool.map(work, items))


def _written_after(file: FileRecord, moment: datetime) -> bool:
    """The record's stored copy may be younger than `moment`: it was created, or last uploaded (a lost copy
    replaced, a content resurrected), after it."""
    stamps = [clock.parse(stamp) for stamp in (file.created_at, file.last_upload_at) if stamp]
    return not stamps or max(stamps) > moment


def _run_input(given: Mapping[str, Any]) -> tuple[bool, str | None, int]:
    """(sweep, now, budget) of an execution's input; ReconcileInputError when a field is not of its kind."""
    unknown = sorted(set(given) - {"sweep", "now", "budget"})
    if unknown:
        raise ReconcileInputError(f"unknown reconcile input field(s): {', '.join(unknown)}")
    sweep = given.get("sweep", True)
    now = given.get("now")
    budget = given.get("budget", DEFAULT_BUDGET)
    if not isinstance(sweep, bool):
        raise ReconcileInputError("sweep must be true or false")
    if now is not None:
        try:
            parsed = clock.parse(str(now))
        except ValueError:
            raise ReconcileInputError("now must be an ISO-8601 UTC time such as 2030-01-01T00:00:00Z") from None
        if parsed.tzinfo is None:
            raise ReconcileInputError("now must say its time zone (Z)")
        now = clock.iso(parsed)
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise ReconcileInputError("budget must be a positive number of pages")
    return sweep, now, budget
