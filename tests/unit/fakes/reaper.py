"""The reconcile's reaper and lease (dfd.adapters.dynamo.reaper, .lease)."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from dfd.core import clock
from dfd.core.conflicts import (
    LeaseLost,
)
from dfd.core.records import (
    EventRecord,
    FileRecord,
    KeyClaim,
    Lease,
    TenantRef,
    UploadRecord,
    UploadStatus,
)
from dfd.ingest import codec as ingest_codec
from dfd.reconcile import codec as reconcile_codec
from dfd.reconcile.ports import Cursor
from dfd.uploads import codec as uploads_codec
from tests.unit.fakes.base import FakeTables, Item


class FakeReaper(FakeTables):
    # ---------------------------------------------------------------- the reconcile (dfd.reconcile.service)
    def get_events(self, event_keys: Collection[str]) -> dict[str, EventRecord]:
        found = {key: self.get_event(key) for key in event_keys}
        return {key: event for key, event in found.items() if event is not None}

    def get_uploads(self, upload_ids: Collection[str]) -> dict[str, UploadRecord]:
        found = {upload_id: self.uploads.get(upload_id) for upload_id in upload_ids}
        return {
            upload_id: uploads_codec.upload_record(copy.deepcopy(item)) for upload_id, item in found.items() if item
        }

    def get_claims(self, bucket: str, keys: Collection[str]) -> dict[str, KeyClaim]:
        found = {key: self.claims.get((bucket, key)) for key in keys}
        return {key: ingest_codec.key_claim(copy.deepcopy(item)) for key, item in found.items() if item}

    def _due(
        self,
        items: Mapping[Any, Item],
        index: tuple[str, str],
        shard: int,
        now: datetime,
        page: tuple[int, Cursor | None],
    ) -> tuple[list[Item], Cursor | None]:
        """A page (its limit and start) of a sparse index's shard (`index`: the shard attribute, its key prefix) due
        by `now`, ordered by (due time, the item's key) as DynamoDB orders a GSI's items."""
        shard_name, prefix = index
        limit, start = page
        due_name = "reconcile_after" if shard_name == "pending_shard" else "reap_after"
        keys = {"pending_shard": ("upload_id",), "tombstone_shard": ("hash",), "reap_shard": ("tenant", "hash")}
        order = (due_name, *keys[shard_name])
        stamp = clock.iso(now)
        due = sorted(
            (i for i in items.values() if i.get(shard_name) == f"{prefix}#{shard}" and str(i.get(due_name)) <= stamp),
            key=lambda item: tuple(str(item[name]) for name in order),
        )
        if start:
            after = tuple(start[name] for name in order)
            due = [item for item in due if tuple(str(item[name]) for name in order) > after]
        found = [copy.deepcopy(item) for item in due[:limit]]
        following = {name: str(found[-1][name]) for name in (shard_name, *order)} if len(due) > limit else None
        return found, following

    def due_uploads(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[UploadRecord], Cursor | None]:
        page, following = self._due(self.uploads, ("pending_shard", "p"), shard, now, (limit, start))
        return [uploads_codec.upload_record(item) for item in page], following

    def count_redrive(self, upload_id: str, now: datetime) -> int | None:
        upload = self.uploads.get(upload_id)
        if upload is None or upload.get("status") != UploadStatus.PENDING:
            return None
        upload["redrives"] = upload.get("redrives", 0) + 1
        upload["last_redrive_at"] = clock.iso(now)
        return int(upload["redrives"])

    def give_up_upload(
        self,
        upload: UploadRecord,
        status: UploadStatus,
        now: datetime,
        *,
        counter_shard: int,
        failure: str | None = None,
    ) -> bool:
        assert 0 <= counter_shard < self.settings.counter_shards, counter_shard
        record = self.uploads.get(upload.upload_id)
        if record is None or record.get("status") != UploadStatus.PENDING:
            return False
        if not self._released(record, upload.tenant, upload.quota_bytes, not upload.pending_uncounted):
            return False
        record.update({"status": status.value, f"{status.value}_at": clock.iso(now)})
        if failure:
            record["failure"] = failure
        record.pop("pending_shard", None)
        self._count(counter_shard, **{f"{status.value}_uploads": 1})
        return True

    def due_contents(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[FileRecord], Cursor | None]:
        page, following = self._due(self.files, ("tombstone_shard", "t"), shard, now, (limit, start))
        return [ingest_codec.file_record(item) for item in page], following

    def forget_older_generation(self, file: FileRecord) -> bool:
        record = self.files.get(file.hash)
        if record is None or record.get("reap_etag") != file.reap_etag:
            return False
        self._drop_claim(record, file, str(file.reap_key))
        record.pop("reap_key", None)
        record.pop("reap_etag", None)
        return True

    def _drop_claim(self, record: Item, file: FileRecord, key: str) -> None:
        """The key claim of a content's object goes with it, unless another content claims that key now."""
        claim = (str(record.get("bucket") or self.settings.bucket), key)
        if self.claims.get(claim, {}).get("hash", file.hash) == file.hash:
            self.claims.pop(claim, None)

    def unindex_content(self, file: FileRecord) -> bool:
        record = self.files.get(file.hash)
        if record is None or int(record.get("live_refs", 0)) <= 0 or "reap_key" in record:
            return False
        record.pop("tombstone_shard", None)
        record.pop("reap_after", None)
        return True

    def reap_content(self, file: FileRecord, *, counter_shard: int) -> bool:
        self._begin(counter_shard)
        record = self.files.get(file.hash)
        if (
            record is None
            or int(record.get("live_refs", 0)) != 0
            or int(record.get("generation", 0)) != file.generation
            or record.get("s3_key") != file.s3_key
            or "reap_key" in record
        ):
            return False
        reaped = ingest_codec.file_record(record)
        del self.files[file.hash]
        self._drop_claim(record, file, str(file.s3_key))
        self._count(
            counter_shard,
            total_files=-1,
            total_bytes_stored=-reaped.size,
            reaped_uploads=reaped.upload_count,
            reaped_duplicates=reaped.duplicates,
            reaped_saved=reaped.saved_bytes,
            reaped_contents=1,
            reaped_bytes=reaped.size,
        )
        return True

    def due_references(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[TenantRef], Cursor | None]:
        page, following = self._due(self.tenant_refs, ("reap_shard", "t"), shard, now, (limit, start))
        return [ingest_codec.tenant_ref(item) for item in page], following

    def reap_reference(self, ref: TenantRef) -> bool:
        key = (ref.tenant, ref.hash)
        record = self.tenant_refs.get(key)
        if record is not None and int(record.get("upload_count", 0)) > 0:
            return False
        self.tenant_refs.pop(key, None)
        if ref.size:  # the adapter's transaction: the size released with the item's delete
            self._move(ref.tenant, stored_bytes=-ref.size, used_bytes=-ref.size)
        return True

    def unindex_reference(self, ref: TenantRef) -> bool:
        record = self.tenant_refs.get((ref.tenant, ref.hash))
        if record is None or int(record.get("upload_count", 0)) <= 0:
            return False
        record.pop("reap_shard", None)
        record.pop("reap_after", None)
        return True

    def mark_lost(self, file: FileRecord, now: datetime) -> bool:
        record = self.files.get(file.hash)
        if record is None or "state" in record or record.get("s3_key") != file.s3_key:
            return False
        if int(record.get("live_refs", 0)) <= 0:
            return False
        record.update(state=ingest_codec.LOST, lost_at=clock.iso(now))
        return True

    def take_lease(self, holder: str, now: datetime, until: datetime) -> Lease:
        lease = self.lease
        if lease.get("holder") not in (None, holder) and str(lease.get("expires_at")) >= clock.iso(now):
            return reconcile_codec.lease(copy.deepcopy(lease))
        lease.update(holder=holder, expires_at=clock.iso(until))
        return reconcile_codec.lease(copy.deepcopy(lease))

    def renew_lease(self, holder: str, until: datetime) -> None:
        if self.lease.get("holder") != holder:
            raise LeaseLost(reconcile_codec.lease(copy.deepcopy(self.lease)))
        self.lease["expires_at"] = clock.iso(until)

    def note_sweep_due(self, now: datetime) -> None:
        self.lease["sweep_due_at"] = clock.iso(now)

    def release_lease(self, holder: str, *, swept_at: datetime | None = None) -> None:
        if self.lease.get("holder") != holder:
            return
        self.lease.pop("holder", None)
        self.lease.pop("expires_at", None)
        if swept_at is not None:
            self.lease["swept_at"] = clock.iso(swept_at)
