"""The simulated world: the real services (upload registration and its 409 precheck, the ingest with its drop
zone, deletes, the reconcile with its reaper) over the in-memory fakes, every port call of theirs a turn of the
scheduler and a point where a fault may strike; the clients, the S3 notifications, the ingest queue and
DynamoDB's TTL around them; the publisher's mapping of each committed change to its events.

The fault map (FAULTS, docs/design/simulation.md): each fault the simulation injects at a port call stands for a
failure the real adapter shows there, as the adapter translates it (dfd.adapters.dynamo.base.translate,
dfd.adapters.s3.base.translate):

- `unavailable` (before: nothing applied) — ServiceUnavailable: DynamoDB ThrottlingException,
  ProvisionedThroughputExceededException, RequestLimitExceeded, InternalServerError once botocore's retries are
  spent, a TransactionCanceledException whose reasons hold ThrottlingError; S3 SlowDown / 503 / InternalError;
  EndpointConnectionError and ConnectTimeoutError (BotoCoreError) on every attempt.
- `conflict` (before, transactions only) — TransactionRetryable: TransactionCanceledException with a
  TransactionConflict reason (another transaction on one of its items).
- `lost` (writes only: applied, its answer lost) — ServiceUnavailable after the write took effect: a
  ReadTimeoutError / ConnectionClosedError on the attempt that applied it and on every resend botocore makes
  (TransactWriteItems' ClientRequestToken makes each resend a no-op; a resent conditional write fails its
  condition), translated from BotoCoreError.
- `crash` (before) and `crash-after` (applied) — the Lambda's process ends at that call (its timeout, an
  out-of-memory kill): the operation stops; a delivery's SQS message becomes visible again and is redelivered.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dfd.adapters.publisher import publish
from dfd.core import clock
from dfd.core.errors import ServiceUnavailable, TransactionRetryable
from dfd.core.notifications import notification_body, refs_from_message_body
from dfd.deletes.service import DeleteService
from dfd.events.outcomes import OutcomeEvent
from dfd.identity.caller import Caller
from dfd.identity.s3access import prefix_for
from dfd.ingest.service import Ingestor
from dfd.lfs.batch import LfsService
from dfd.lfs.request import LfsError
from dfd.reconcile.service import LEASE_SECONDS, Reconciler
from dfd.uploads.multipart import MultipartService
from dfd.uploads.service import UploadRequest, UploadService
from tests.sim.scheduler import Crash, Scheduler
from tests.unit.callers import settings as unit_settings
from tests.unit.fakes import FakeObjectStore, FakeRepository
from tests.unit.feed import TABLES, FakeStream, RecordingSink

START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
BUCKET = "b"
ALICE = Caller(owner="alice-sub", tenant="acme", is_admin=False)
CAROL = Caller(owner="carol-sub", tenant="acme", is_admin=False)
BOB = Caller(owner="bob-sub", tenant="globex", is_admin=False)
USERS = (ALICE, CAROL, BOB)
# shared and distinct contents: small, so quotas are reached; one over MaxUploadBytes (a drop zone rejects it)
CONTENTS = (*(f"content {i} ".encode() * (3 + 5 * i) for i in range(5)), b"z" * 400)
MAX_UPLOAD = 300
QUOTA = 700

READ_PREFIXES = ("get_", "due_", "scan_", "tenant_", "owner_", "counter_", "ingest_state", "open", "stream", "head")
READS = {"exists", "list_objects", "list_parts", "presign_put", "presign_get", "presign_upload_part"}
TRANSACTIONS = {
    "commit_stored",
    "commit_duplicate",
    "commit_resurrect",
    "commit_precheck_duplicate",
    "adopt_copy",
    "commit_delete",
    "register_upload",
    "register_multipart_upload",
    "reap_content",
    "end_pending_upload",
    "cancel_upload",
    "give_up_upload",
}


def reads_only(point: str) -> bool:
    """A port call that changes nothing (a read, a presigned URL, a pause)."""
    port, _, method = point.partition(".")
    if port == "clock" or point == "start":
        return True
    return port != "client" and (method in READS or method.startswith(READ_PREFIXES))


def faults_at(point: str) -> tuple[str, ...]:
    """The faults the real adapter can show at this port call (module docstring)."""
    port, _, method = point.partition(".")
    if port == "clock":
        return ()
    if port == "client":  # the client's own PUT to a presigned URL: S3 refuses or the answer is lost
        return ("unavailable", "lost")
    kinds: tuple[str, ...] = ("unavailable", "crash")
    if not reads_only(point):
        kinds += ("lost", "crash-after")
    if port == "repo" and method in TRANSACTIONS:
        kinds += ("conflict",)
    return kinds


class Port:
    """A port of the services (the repository, the object store) whose every call is a scheduler turn and may meet
    the fault the scheduler chose for it."""

    def __init__(self, world: World, name: str, target: Any) -> None:
        self._world = world
        self._name = name
        self._target = target

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if attr.startswith("_") or not callable(value):
            return value
        point = f"{self._name}.{attr}"

        def call(*args: Any, **kwargs: Any) -> Any:
            fault = self._world.scheduler.call(point)
            if fault is None:
                return value(*args, **kwargs)
            self._world.reached.add((point, fault))
            if fault == "unavailable":  # throttled or unreachable: nothing applied
                raise ServiceUnavailable(f"{point}: throttled or unavailable (simulated)")
            if fault == "conflict":  # TransactionCanceledException [TransactionConflict]: nothing applied
                raise TransactionRetryable(f"{point}: cancelled, TransactionConflict (simulated)")
            if fault == "crash":
                raise Crash
            value(*args, **kwargs)  # applied ...
            if fault == "crash-after":
                raise Crash
            raise ServiceUnavailable(f"{point}: applied, its answer lost (simulated)")  # ... "lost"

        return call


class SimObjects(FakeObjectStore):
    """The fake S3 with its bucket's notifications: every object created under uploads/ or s3/ (a PUT, a copy, a
    completed multipart upload) sends S3's event to the ingest queue — at least once (sometimes twice)."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self._world = world

    def put(self, bucket: str, key: str, data: bytes, **kwargs: Any) -> Any:
        found = super().put(bucket, key, data, **kwargs)
        # S3's ETag of a single PUT is the MD5 of its bytes: the same bytes sent again have the same one
        found.etag = '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'
        self._world.notify(key)
        return found


@dataclass
class Message:
    ident: str
    body: str
    receives: int = 0


@dataclass
class Issued:
    """An upload as its client knows it: what POST /upload answered, whether the PUT was acknowledged."""

    ordinal: int
    user: Caller
    content: int
    upload_id: str
    key: str | None
    acked: bool = False  # the PUT's 200 reached the client (or the 409: processed at once)
    deleted: bool = False  # a DELETE of it was sent (answered or not)


@dataclass
class World:
    seed: int
    scheduler: Scheduler = field(default_factory=Scheduler)
    now: datetime = START
    reached: set[tuple[str, str]] = field(default_factory=set)
    messages: list[Message] = field(default_factory=list)
    issued: list[Issued] = field(default_factory=list)
    events: list[OutcomeEvent] = field(default_factory=list)
    event_ids: set[str] = field(default_factory=set)
    duplicate_ids: list[OutcomeEvent] = field(default_factory=list)
    removed_uploads: list[dict[str, Any]] = field(default_factory=list)  # upload items DynamoDB's TTL deleted
    dlq: list[Message] = field(default_factory=list)
    _sent: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.settings = unit_settings(
            bucket=BUCKET,
            counter_shards=2,
            pending_shards=2,
            max_upload_bytes=MAX_UPLOAD,
            tenant_quota_bytes=QUOTA,
            tenant_pending_limit=4,
            reconcile_grace_seconds=300,
            delete_grace_seconds=600,
            upload_url_expires=900,
            reconcile_max_redrives=3,
        )
        self.repo = FakeRepository(self.settings)
        self.objects = SimObjects(self)
        repo: Any = Port(self, "repo", self.repo)
        objects: Any = Port(self, "s3", self.objects)
        now = self.clock
        multipart = MultipartService(self.settings, repo, objects, now=now)
        self.uploads = UploadService(self.settings, repo, objects, now=now, rng=random.Random(self.seed + 1))
        self.deletes = DeleteService(self.settings, repo, multipart, now=now, sleep=self.sleep)
        self.ingestor = Ingestor(
            self.settings, repo, objects, now=now, sleep=self.sleep, rng=random.Random(self.seed + 2)
        )
        self.lfs = LfsService(self.settings, repo, objects, self.uploads, self.ingestor.ingest)
        self.reconciler = Reconciler(
            self.settings, repo, objects, self, workers=1, wall=now, rng=random.Random(self.seed + 3)
        )
        self.stream = FakeStream(self.repo)
        self.sink = RecordingSink()

    # ------------------------------------------------------------------ time
    def clock(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        """A backoff's pause: time passes, and the other operations may move meanwhile."""
        self.scheduler.call("clock.sleep")
        self.now += timedelta(seconds=seconds)

    # ------------------------------------------------------------------ the queue (and the reconcile's IngestQueue)
    def notify(self, key: str) -> None:
        if not (key.startswith(self.settings.upload_prefix) or key.startswith("s3/")):
            return
        ident = self._ident("n")
        body = notification_body(BUCKET, key, clock.iso(self.now))
        self.messages.append(Message(ident, body))
        if self.rng.random() < 0.1:  # S3 delivers at least once
            self.messages.append(Message(ident + "d", body))

    def _ident(self, kind: str) -> str:
        """A message's name: the operation that sent it and its count of them (`n`: S3's notifications, `r`: the
        reconcile's re-drives), so a shrunk script's decisions name the same messages."""
        op = self.scheduler.current()
        label = op.label if op else "w"
        self._sent[label] += 1
        return f"{label}.{kind}{self._sent[label]}"

    def send(self, body: str) -> None:
        """The reconcile's re-drive of a notification (dfd.reconcile.ports.IngestQueue)."""
        self.messages.append(Message(self._ident("r"), body))

    def redeliver(self, message: Message) -> None:
        """A delivery that did not finish: SQS makes the message visible again, until maxReceiveCount (then the DLQ;
        the reconcile re-drives what it left pending)."""
        message.receives += 1
        if message.receives >= 4:
            self.dlq.append(message)
        else:
            self.messages.append(message)

    # ------------------------------------------------------------------ the operations
    def op_upload(self, user: Caller, content: int, checksum: bool) -> Callable[[], Any]:
        """POST /upload, then the client's PUT of the bytes (a 409 precheck: nothing to send)."""
        data = CONTENTS[content]
        digest = hashlib.sha256(data).hexdigest()

        def run() -> str:
            claim = digest if checksum else None
            request = UploadRequest(f"f{content}.bin", len(data), "application/octet-stream", claim)
            answer = self.uploads.create(request, user)
            if answer.status == 409 and "upload_id" in answer.body:
                self.issued.append(Issued(len(self.issued), user, content, str(answer.body["upload_id"]), None, True))
                return "409"
            if answer.status != 201:
                return str(answer.status)
            issued = Issued(len(self.issued), user, content, str(answer.body["upload_id"]), str(answer.body["key"]))
            self.issued.append(issued)
            headers: dict[str, str] = answer.body["headers"]
            metadata = {n[len("x-amz-meta-") :]: v for n, v in headers.items() if n.startswith("x-amz-meta-")}
            self.client_put(issued.key or "", data, metadata, checksum=checksum, expires=answer.body.get("expires_in"))
            issued.acked = True
            return "201+put"

        return run

    def client_put(self, key: str, data: bytes, metadata: dict[str, str], *, checksum: bool, expires: Any) -> None:
        """The presigned PUT (If-None-Match: *): refused once its URL expired or an object is at the key."""
        fault = self.scheduler.call("client.put")
        if fault == "unavailable":
            self.reached.add(("client.put", fault))
            raise ServiceUnavailable("the PUT failed")
        record = self.repo.uploads.get(key.rsplit("/", 1)[-1])
        if record is None or clock.parse(record["expires_at"]) < self.now or (BUCKET, key) in self.objects.objects:
            raise ServiceUnavailable("the PUT was refused: its URL expired, or the key holds an object")
        kind = "application/octet-stream"
        self.objects.put(BUCKET, key, data, checksum=checksum, content_type=kind, metadata=metadata)
        if fault == "lost":
            self.reached.add(("client.put", fault))
            raise ServiceUnavailable("the PUT's answer was lost")

    def op_lfs(self, user: Caller, content: int) -> Callable[[], Any]:
        """A git-lfs push of one object: the batch, the PUT it asks for, the verify (which ingests it at once)."""
        data = CONTENTS[content]
        oid = hashlib.sha256(data).hexdigest()

        def run() -> str:
            body = {"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]}
            try:
                answer = self.lfs.batch(user, "game", body, "https://dfd.example")["objects"][0]
            except LfsError as refused:
                return f"batch {refused.status}"
            if "actions" not in answer:
                return "held" if "error" not in answer else f"object {answer['error']['code']}"
            href, headers = answer["actions"]["upload"]["href"], answer["actions"]["upload"]["header"]
            key = href.split(f"{BUCKET}/", 1)[1].split("?")[0]
            upload_id = answer["actions"]["verify"]["href"].rsplit("/", 1)[1]
            issued = Issued(len(self.issued), user, content, upload_id, key)
            self.issued.append(issued)
            metadata = {n[len("x-amz-meta-") :]: v for n, v in headers.items() if n.startswith("x-amz-meta-")}
            self.client_put(key, data, metadata, checksum="x-amz-checksum-sha256" in headers, expires=None)
            issued.acked = True
            try:
                self.lfs.verify(user, upload_id, {"oid": oid, "size": len(data)})
            except LfsError as refused:
                return f"verify {refused.status}"
            return "verified"

        return run

    def op_drop(self, user: Caller, content: int) -> Callable[[], Any]:
        """An S3 tool's PUT under the caller's s3/ prefix (the drop zone), one name per content."""
        data = CONTENTS[content]
        key = prefix_for(user.tenant, user.owner) + f"dir/f{content}.bin"

        def run() -> str:
            fault = self.scheduler.call("client.put")
            if fault == "unavailable":
                self.reached.add(("client.put", fault))
                return "failed"
            self.objects.put(BUCKET, key, data, content_type="application/octet-stream")
            return "put"

        return run

    def op_delete(self, user: Caller, upload_id: str) -> Callable[[], Any]:
        def run() -> str:
            return self.deletes.delete(user, upload_id).outcome

        return run

    def op_deliver(self, message: Message) -> Callable[[], Any]:
        """One delivery of an ingest-queue message: each object it names, ingested."""

        def run() -> list[str]:
            return [self.ingestor.ingest(ref).outcome.value for ref in refs_from_message_body(message.body)]

        return run

    def op_reconcile(self, *, sweep: bool = True) -> Callable[[], Any]:
        """A reconcile run as the workflow drives it: begin, every page, finish; a failed page abandons the run (the
        workflow's Catch frees the lease); a crash leaves the lease held until it expires."""

        def run() -> Any:
            state = self.reconciler.begin({"now": clock.iso(self.now), "sweep": sweep})
            if "skipped" in state:
                return "skipped"
            try:
                while state["pos"]["phase"] != "done":
                    state = self.reconciler.page(state["pos"]["phase"], state, lambda *_: None)
            except Exception:
                self.reconciler.abandon(state)
                raise
            return self.reconciler.finish(state)

        return run

    def ttl(self) -> int:
        """DynamoDB's TTL: upload and event items whose `ttl` passed are deleted (a REMOVE: no outcome). A pending
        upload's TTL (UploadTtlDays) is days past the reconcile's grace: the scheduled reconcile has ended it long
        before, unless it stopped for that long — outside the model (docs/design/simulation.md, "Findings")."""
        epoch = clock.epoch(self.now)
        gone = 0
        for table in (self.repo.uploads, self.repo.events):
            due = [k for k, item in table.items() if item.get("ttl") is not None and int(item["ttl"]) <= epoch]
            for key in [k for k in due if self._settled(table[k])]:
                if table is self.repo.uploads:
                    self.removed_uploads.append(table[key])
                del table[key]
                gone += 1
        return gone

    def _settled(self, item: dict[str, Any]) -> bool:
        """An item DynamoDB's TTL may delete in the model: not a pending upload, and no object left at its key. An
        upload item reaches its TTL (UploadTtlDays) days after the scheduled reconcile ended it, expired it or
        settled its leftover object (its pending and orphans passes, every run): a record expiring with work still
        due needs the reconcile stopped for days — outside the model (docs/design/simulation.md, "Findings")."""
        if item.get("status") == "pending":
            return False
        key = item.get("s3_key") or item.get("key")
        return not key or (BUCKET, key) not in self.objects.objects

    # ------------------------------------------------------------------ the publisher
    def publish(self) -> None:
        """The committed changes since the last call, published (the stream delivers each once here; a re-delivery
        publishes the same ids, as test_outcomes shows)."""
        records = self.stream.drain()
        if not records:
            return
        result = publish(records, TABLES, self.sink)
        assert not result.failed
        for event in result.published:
            if event.event_id in self.event_ids:
                self.duplicate_ids.append(event)
            self.event_ids.add(event.event_id)
            self.events.append(event)


LEASE = timedelta(seconds=LEASE_SECONDS)
