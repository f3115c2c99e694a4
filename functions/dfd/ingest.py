"""The ingest decision: one object version → stored (new content) or duplicate, exactly once.

Flow per object (docs/design.md):
  1. Identify the object version (VersionId or ETag) → event key, with ONE S3 call: a GetObject whose headers
     may carry S3's stored full-object SHA-256 (then the body is dropped unread), or — when the upload id in
     the key says the PUT carried a SHA-256 (ids.hints_checksum) — a HeadObject, so a checksummed object
     costs no GetObject at all. The hint only orders the calls; the checksum always comes from S3.
  2. Otherwise hash the body as it streams (ranged GETs in parallel, IfMatch the ETag, for large objects).
  3. ONE consistent BatchGetItem: the event record, the file record for the hash, the upload record.
  4. ONE TransactWriteItems keyed on the event and the content (new or duplicate), counters included.
  5. After the commit, a duplicate's bytes are deleted (IfMatch its ETag; repeatable).
Cancellation reasons drive the retries: event already recorded → replay; file appeared → duplicate;
file is this very object → canonical (never deleted); conflicts/throttling → backoff.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dfd import clock
from dfd.adapters.dynamo import CancelledTransaction, Item, Repository
from dfd.adapters.s3 import ObjectInfo, ObjectStore, OpenedObject
from dfd.config import Settings
from dfd.errors import ObjectChanged, ObjectNotFound, ServiceUnavailable
from dfd.events import ObjectRef
from dfd.ids import event_key, filename_from_key, hints_checksum, key_claim, upload_id_from_key, version_token

MAX_ATTEMPTS = 8


class Outcome(StrEnum):
    STORED = "stored"  # new content: this object is now the canonical copy
    DUPLICATE = "duplicate"  # content already stored elsewhere: counted, bytes deleted
    REPLAY = "replay"  # this object version was already ingested: nothing changed
    CANONICAL = "canonical"  # the event names the stored copy itself: nothing changed, nothing deleted
    IGNORED = "ignored"  # not ours: other bucket, outside the prefix
    GONE = "gone"  # the object no longer exists (deleted duplicate, never uploaded)
    SUPERSEDED = "superseded"  # the object changed while read: the newer version's event follows
    REJECTED = "rejected"  # a second PUT at an upload key already processed: deleted, not counted
    CONFLICT = "conflict"  # a stored object was overwritten in place by a direct put: nothing deleted, alarmed


@dataclass
class IngestResult:
    outcome: Outcome
    bucket: str
    key: str
    hash: str | None = None
    size: int | None = None
    upload_id: str | None = None
    event_key: str | None = None
    bytes_saved: int = 0
    deleted: bool = False
    hashed_bytes: int = 0
    attempts: int = 0
    detail: dict[str, Any] = field(default_factory=dict)

    def log_keys(self) -> dict[str, Any]:
        keys = {
            "outcome": str(self.outcome),
            "bucket": self.bucket,
            "key": self.key,
            "hash": self.hash,
            "size": self.size,
            "upload_id": self.upload_id,
            "event_key": self.event_key,
            "bytes_saved": self.bytes_saved,
            "deleted": self.deleted,
            "hashed_bytes": self.hashed_bytes,
            "attempts": self.attempts,
        }
        return {k: v for k, v in keys.items() if v is not None} | self.detail


class Ingestor:
    def __init__(
        self,
        settings: Settings,
        repo: Repository,
        objects: ObjectStore,
        *,
        now: Callable[[], Any] = clock.now,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        after_commit: Callable[[IngestResult], None] | None = None,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._now = now
        self._sleep = sleep
        self._rng = rng or random.Random()
        # test seam: runs between the commit and the delete (crash injection)
        self._after_commit = after_commit

    # ------------------------------------------------------------------ entry point
    def ingest(self, ref: ObjectRef) -> IngestResult:
        result = IngestResult(Outcome.IGNORED, ref.bucket, ref.key)
        if ref.bucket != self._s.bucket:
            result.detail["reason"] = "other bucket"
            return result
        if not ref.key.startswith(self._s.upload_prefix) or ref.key.endswith("/"):
            result.detail["reason"] = "outside the upload prefix"
            return result
        result.upload_id = upload_id_from_key(self._s.upload_prefix, ref.key)
        try:
            opened = self._objects.open(ref.bucket, ref.key, expect_checksum=hints_checksum(result.upload_id))
        except ObjectNotFound:
            result.outcome = Outcome.GONE
            return result
        with opened:
            info = opened.info
            result.event_key = event_key(info.bucket, info.key, version_token(info.version_id, info.etag))
            result.size = info.size
            try:
                result.hash, result.hashed_bytes = self._digest(opened)
            except ObjectChanged:
                result.outcome = Outcome.SUPERSEDED
                return result
            except ObjectNotFound:  # deleted between the HEAD and the GET (a concurrent duplicate's delete)
                result.outcome = Outcome.GONE
                return result
        self._decide_and_commit(info, result)
        return result

    def _digest(self, opened: OpenedObject) -> tuple[str, int]:
        info = opened.info
        if info.checksum_sha256:
            return info.checksum_sha256, 0  # verified by S3 on upload: the body is never read
        digest = hashlib.sha256()
        count = self._objects.stream(opened, digest.update)
        if count != info.size:
            raise ObjectChanged(f"read {count} bytes of {info.key}, expected {info.size}")
        return digest.hexdigest(), count

    # ------------------------------------------------------------------ decision
    def _decide_and_commit(self, info: ObjectInfo, result: IngestResult) -> None:
        assert result.hash is not None and result.event_key is not None
        state = self._repo.ingest_state(result.event_key, result.hash, result.upload_id)
        if state.event is not None:
            self._replayed(info, state.event, result)
            return
        upload = state.upload
        known = state.file
        for attempt in range(1, MAX_ATTEMPTS + 1):
            result.attempts = attempt
            if known is not None and known.get("s3_key") == info.key:
                # the event names the stored copy itself (its event record has expired): change nothing,
                # but record the event again so that sweeps stop re-driving it
                result.outcome = Outcome.CANONICAL
                self._repo.put_event(self._event_record(info, result, Outcome.STORED))
                return
            duplicate = known is not None
            plan = self._plan(info, result, upload, known)
            try:
                self._repo.transact(plan.items)
            except CancelledTransaction as cancelled:
                if cancelled.failed(plan.roles["event"]):
                    event = cancelled.item(plan.roles["event"]) or self._repo.get_event(result.event_key)
                    self._replayed(info, event or {"outcome": "unknown"}, result)
                    return
                if cancelled.failed(plan.roles["claim"]):
                    self._conflict(info, result, cancelled.item(plan.roles["claim"]))
                    return
                if cancelled.failed(plan.roles["file"]):
                    # new: the file appeared (lost a race) → redo as duplicate; duplicate: the file vanished
                    # (→ new) or is this very object (→ canonical). The next plan follows what is there now.
                    known = cancelled.item(plan.roles["file"]) or self._repo.get_file(result.hash, consistent=True)
                    continue
                if "upload" in plan.roles and cancelled.failed(plan.roles["upload"]):
                    self._rejected(info, result)
                    return
                self._backoff(attempt)
                continue
            except ServiceUnavailable:
                if attempt == MAX_ATTEMPTS:
                    raise
                self._backoff(attempt)
                continue
            result.outcome = Outcome.DUPLICATE if duplicate else Outcome.STORED
            if duplicate:
                result.bytes_saved = info.size
                if self._after_commit:
                    self._after_commit(result)
                result.deleted = self._objects.delete(info.bucket, info.key, info.etag)
            return
        raise ServiceUnavailable(f"ingest of {info.key} did not commit after {MAX_ATTEMPTS} attempts")

    def _backoff(self, attempt: int) -> None:
        self._sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + self._rng.random()))

    def _replayed(self, info: ObjectInfo, event: Item, result: IngestResult) -> None:
        """This object version was ingested before: change nothing, but finish a duplicate's delete (or a
        rejected second PUT's)."""
        result.outcome = Outcome.REPLAY
        result.detail["recorded_outcome"] = event.get("outcome")
        if event.get("outcome") in (Outcome.DUPLICATE, Outcome.REJECTED):
            result.deleted = self._objects.delete(info.bucket, info.key, info.etag)

    def _conflict(self, info: ObjectInfo, result: IngestResult, claim: Item | None) -> None:
        """The key holds another content's stored copy, overwritten in place (a direct put bypassing the API):
        that record's bytes are gone. Never delete here, count nothing; record it so operators are told once."""
        claim = claim or self._repo.get_event(key_claim(info.bucket, info.key)) or {}
        if claim.get("hash") == result.hash:
            result.outcome = Outcome.CANONICAL
            self._repo.put_event(self._event_record(info, result, Outcome.STORED))
            return
        result.outcome = Outcome.CONFLICT
        result.detail["stored_hash"] = claim.get("hash")
        self._repo.put_event(self._event_record(info, result, Outcome.CONFLICT))

    def _rejected(self, info: ObjectInfo, result: IngestResult) -> None:
        """A second object version at an upload key whose upload was already processed (the presigned URL was
        used again after a duplicate's bytes were deleted): not an upload of its own — delete it, count nothing.
        A stored object is never deleted: its key is claimed."""
        if self._repo.get_event(key_claim(info.bucket, info.key)) is not None:
            self._conflict(info, result, None)
            return
        result.outcome = Outcome.REJECTED
        if self._repo.put_event(self._event_record(info, result, Outcome.REJECTED)):
            result.deleted = self._objects.delete(info.bucket, info.key, info.etag)
        else:  # a concurrent delivery recorded this version first: follow what it recorded
            self._replayed(info, self._repo.get_event(result.event_key or "") or {}, result)

    def _event_record(self, info: ObjectInfo, result: IngestResult, outcome: Outcome) -> Item:
        now = self._now()
        return {
            "event_key": result.event_key,
            "outcome": str(outcome),
            "hash": result.hash,
            "bucket": info.bucket,
            "key": info.key,
            "etag": info.etag,
            "size": info.size,
            "upload_id": result.upload_id,
            "processed_at": clock.iso(now),
            "ttl": clock.epoch(clock.plus(now, days=self._s.event_ttl_days)),
        }

    def _plan(self, info: ObjectInfo, result: IngestResult, upload: Item | None, known: Item | None) -> Plan:
        assert result.hash is not None and result.event_key is not None
        duplicate = known is not None
        event = self._event_record(info, result, Outcome.DUPLICATE if duplicate else Outcome.STORED)
        stamp = event["processed_at"]
        filename = (upload or {}).get("filename") or filename_from_key(info.key)
        content_type = (upload or {}).get("content_type") or info.content_type or "application/octet-stream"
        repo = self._repo
        plan = Plan()
        plan.add("event", repo.put_event_item(event))
        claim = key_claim(info.bucket, info.key)
        shard = self._s.shard_ids[self._rng.randrange(self._s.counter_shards)]
        if duplicate:
            plan.add("file", repo.count_duplicate_file_item(result.hash, info.key, stamp))
            plan.add("claim", repo.no_claim_item(claim))  # never delete bytes some record stores at this key
            deltas = {"total_uploads": 1, "duplicates_avoided": 1, "total_s3_size_saved": info.size}
        else:
            record = {
                "hash": result.hash,
                "size": info.size,
                "content_type": content_type,
                "filename": filename,
                "s3_key": info.key,
                "bucket": info.bucket,
                "etag": info.etag,
                "created_at": stamp,
                "last_upload_at": stamp,
                "upload_count": 1,
                "first_upload_id": result.upload_id,
            }
            plan.add("file", repo.put_new_file_item(record))
            plan.add("claim", repo.put_claim_item(claim, result.hash, stamp))
            deltas = {"total_uploads": 1, "total_files": 1, "total_bytes_stored": info.size}
        if result.upload_id is not None:
            fields = {
                "status": event["outcome"],
                "hash": result.hash,
                "size": info.size,
                "processed_at": stamp,
                "s3_key": info.key,
                "bucket": info.bucket,
            }
            defaults = {"filename": filename, "content_type": content_type, "created_at": stamp}
            plan.add("upload", repo.finish_upload_item(result.upload_id, fields, defaults, result.event_key))
        plan.add("counters", repo.add_counters_item(shard, deltas))
        return plan


@dataclass
class Plan:
    """The items of one TransactWriteItems, and which item plays which role (cancellation reasons are
    reported by position)."""

    items: list[Any] = field(default_factory=list)
    roles: dict[str, int] = field(default_factory=dict)

    def add(self, role: str, item: Any) -> None:
        self.roles[role] = len(self.items)
        self.items.append(item)
