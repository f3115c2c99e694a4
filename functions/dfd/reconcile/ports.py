"""The reconcile's ports: what its steps and the reaper read and write through the repository
(dfd.adapters.dynamo.reaper, .lease, .reads), and the ingest queue (SQS, :class:`dfd.adapters.queue.SqsIngestQueue`)
its re-drives go to."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dfd.core.reads import StatsReads
from dfd.history.ports import SnapshotReads

if TYPE_CHECKING:
    from dfd.core.records import EventRecord, FileRecord, KeyClaim, Lease, TenantRef, UploadRecord, UploadStatus

# where the next page of a listing starts, as the adapter wrote it (JSON: it travels in the workflow's state)
Cursor = dict[str, str]


class IngestQueue(Protocol):
    def send(self, body: str) -> None:
        """Put one message (an S3 notification's body) on the ingest queue."""
        ...


class LeaseStore(Protocol):
    """The reconcile's lease: one run at a time."""

    def take_lease(self, holder: str, now: datetime, until: datetime) -> Lease:
        """Take the reconcile's lease for `holder` until `until` when it is free or expired at `now`: the lease as
        it is afterwards (held by another: not taken)."""
        ...

    def renew_lease(self, holder: str, until: datetime) -> None:
        """Extend `holder`'s lease; raises LeaseLost when it holds it no more."""
        ...

    def note_sweep_due(self, now: datetime) -> None:
        """A sweep was asked for and skipped (the lease was held): the next run sweeps."""
        ...

    def release_lease(self, holder: str, *, swept_at: datetime | None = None) -> None:
        """Free `holder`'s lease (nothing when it holds it no more); `swept_at`: the run completed a sweep started
        then."""
        ...


class ReconcileStore(StatsReads, SnapshotReads, LeaseStore, Protocol):
    """What dfd.reconcile.service reads and writes."""

    def get_events(self, event_keys: Collection[str]) -> dict[str, EventRecord]:
        """The event records among `event_keys` that exist, by event key (consistent reads)."""
        ...

    def get_uploads(self, upload_ids: Collection[str]) -> dict[str, UploadRecord]: ...

    def get_claims(self, bucket: str, keys: Collection[str]) -> dict[str, KeyClaim]:
        """The claims of those object keys that hold a stored copy, by key."""
        ...

    def due_uploads(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[UploadRecord], Cursor | None]:
        """One page of the pending uploads of index shard `shard` whose grace period ended before `now`, and where
        the next page starts (None: the last)."""
        ...

    def count_redrive(self, upload_id: str, now: datetime) -> int | None:
        """+1 re-drive on a pending upload: its count, or None when it is no longer pending."""
        ...

    def give_up_upload(
        self,
        upload: UploadRecord,
        status: UploadStatus,
        now: datetime,
        *,
        counter_shard: int,
        failure: str | None = None,
    ) -> bool:
        """A pending upload (as read) becomes `status` (expired or failed, with `failure`), out of the pending
        index, its quota bytes released and its end counted on counter shard `counter_shard` (`expired_uploads` or
        `failed_uploads` +1), all in one transaction; False when it is no longer pending or no longer holds those
        bytes."""
        ...

    def due_contents(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[FileRecord], Cursor | None]:
        """One page of the contents marked for the reaper (index shard `shard`) whose grace ended before `now`."""
        ...

    def forget_older_generation(self, file: FileRecord) -> bool:
        """A resurrected content's older object is deleted: forget it (`reap_key`/`reap_etag`, as read) and its
        key's claim (unless another content's). False when the record moved on."""
        ...

    def unindex_content(self, file: FileRecord) -> bool:
        """A content counted again (live references, no older object left) leaves the reaper's index; False when
        that no longer holds."""
        ...

    def reap_content(self, file: FileRecord, *, counter_shard: int) -> bool:
        """A tombstoned content whose object is deleted: in one transaction its record (still tombstoned at the
        generation and key read), its key's claim (unless another content's), and on one counter shard the file
        and its bytes out, its history (uploads, duplicates, bytes saved) into the reaped counters. False when
        the record changed (resurrected meanwhile)."""
        ...

    def due_references(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[TenantRef], Cursor | None]:
        """One page of the tenant references a delete marked (index shard `shard`) before `now`."""
        ...

    def reap_reference(self, ref: TenantRef) -> bool:
        """A reference at 0 is deleted and its size released from its tenant's usage, in one transaction; False
        when it is counted again."""
        ...

    def unindex_reference(self, ref: TenantRef) -> bool:
        """A reference counted again leaves the reaper's index; False when it is at 0 again."""
        ...

    def mark_lost(self, file: FileRecord, now: datetime) -> bool:
        """Every copy of a live content is gone: mark it lost (conditioned on its record still naming the object
        read, live); False when it changed."""
        ...
