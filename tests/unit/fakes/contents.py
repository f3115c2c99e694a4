"""The contents aggregate (dfd.adapters.dynamo.contents, .precheck, .adoption): the ingest's commits, the
precheck's duplicate, adoption, resurrection."""

from __future__ import annotations

import copy
from datetime import datetime

from dfd.core import clock
from dfd.core.conflicts import (
    CommitRefused,
    FileAppeared,
    FileChanged,
    FileIsThisObject,
    FileVanished,
    KeyClaimed,
    PrecheckLimited,
    ReapPending,
    UploadTaken,
)
from dfd.core.records import (
    FileRecord,
    UploadStatus,
)
from dfd.ingest import codec as ingest_codec
from dfd.ingest.ports import ObjectVersion, TenantShare
from dfd.uploads import codec as uploads_codec
from dfd.uploads.ports import PrecheckDuplicate
from tests.unit.fakes.base import FakeTables, _parsed


class FakeContents(FakeTables):
    # ---------------------------------------------------------------- contents
    def record_event(self, version: ObjectVersion, outcome: str, now: datetime) -> bool:
        if version.event_key in self.events:
            return False
        self.events[version.event_key] = self._event(version, outcome, now)
        return True

    def record_rejected_event(self, version: ObjectVersion, now: datetime, *, counter_shard: int) -> bool:
        if not self.record_event(version, UploadStatus.REJECTED.value, now):
            return False
        self._add_counters(counter_shard, rejected_uploads=1)
        return True

    def commit_stored(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        file = self.files.get(version.hash)
        refused = FileAppeared(ingest_codec.file_record(copy.deepcopy(file))) if file is not None else None
        self._begin_commit(version, counter_shard, claims=True, file=refused, tenant=tenant)
        stamp = clock.iso(now)
        self.nonces += 1
        self.files[version.hash] = ingest_codec.new_file_item(
            version, filename, content_type, stamp, incarnation=f"{self.nonces:016x}"
        )
        self._commit(version, "stored", UploadStatus.STORED, filename, content_type, now, tenant)
        self._count(counter_shard, total_uploads=1, total_files=1, total_bytes_stored=version.size)

    def commit_duplicate(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        file = self.files.get(version.hash)
        record = _parsed(ingest_codec.file_record, file)
        refused: CommitRefused | None = None
        if record is None:
            refused = FileVanished(None)
        elif record.s3_key is None:  # `s3_key <> :key` is false on a missing attribute
            refused = FileChanged(record)
        elif record.s3_key == version.key:
            refused = FileIsThisObject(record)
        elif record.tombstoned:  # new references only to live (or lost: adopted) content: a count above 0
            refused = FileChanged(record)
        self._begin_commit(version, counter_shard, claims=False, file=refused, tenant=tenant)
        assert file is not None
        self._count_duplicate(file, now)
        status = UploadStatus.STORED if tenant is not None and not tenant.held else UploadStatus.DUPLICATE
        self._commit(version, "duplicate", status, filename, content_type, now, tenant)
        self._count(counter_shard, total_uploads=1, duplicates_avoided=1, total_s3_size_saved=version.size)

    def commit_resurrect(
        self,
        version: ObjectVersion,
        tombstoned: FileRecord,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        file = self.files.get(version.hash)
        record = _parsed(ingest_codec.file_record, file)
        refused: CommitRefused | None = None
        if record is None:
            refused = FileVanished(None)
        elif not record.tombstoned or record.generation != tombstoned.generation:
            refused = FileChanged(record)
        elif record.s3_key != tombstoned.s3_key or record.reap_key is not None:
            refused = ReapPending(record)
        self._begin_commit(version, counter_shard, claims=True, file=refused, tenant=tenant)
        assert file is not None
        file.pop("state", None)  # a lost mark goes: this copy exists
        file.pop("lost_at", None)
        file.update(
            generation=tombstoned.generation + 1,
            reap_key=file["s3_key"],
            reap_etag=file.get("etag", ""),
            s3_key=version.key,
            bucket=version.bucket,
            etag=version.etag,
            live_refs=1,
            last_upload_at=clock.iso(now),
            stores=file.get("stores", 1) + 1,
            upload_count=file.get("upload_count", 0) + 1,
        )
        self._commit(version, "stored", UploadStatus.STORED, filename, content_type, now, tenant)
        self._count(counter_shard, total_uploads=1)

    def commit_precheck_duplicate(self, upload: PrecheckDuplicate, *, counter_shard: int, now: datetime) -> None:
        self._begin(counter_shard)
        assert upload.upload_id not in self.uploads, "upload ids are unique"
        file = self.files.get(upload.hash)
        record = _parsed(ingest_codec.file_record, file)
        # the adapter's order: upload (a fresh id: never refused), file, tenant; no new reference unless live
        if file is None or record is None or not record.live:
            raise FileVanished(record)
        refused = self._tenant_refused(TenantShare(upload.tenant, held=True, counted=True), upload.hash)
        if refused is not None:
            raise refused
        counted = self.prechecks.get(upload.tenant, {})
        bound = upload.bound
        if bound is not None:  # the adapter's precheck_bound_update
            window = counted.get("precheck_window")
            same = window == bound.window and counted.get("prechecks", 0) < bound.limit
            if (window == bound.window) if bound.fresh else not same:
                raise PrecheckLimited(_parsed(uploads_codec.precheck_count, self.prechecks.get(upload.tenant)))
            counted = self.prechecks.setdefault(upload.tenant, {})
            counted["prechecks"] = 1 if bound.fresh else counted["prechecks"] + 1
            counted["precheck_window"] = bound.window
        stamp = clock.iso(now)
        self.uploads[upload.upload_id] = uploads_codec.precheck_upload_item(upload, stamp)
        self._count_duplicate(file, now)
        ref = self.tenant_refs[(upload.tenant, upload.hash)]
        ref["upload_count"] = ref.get("upload_count", 0) + 1
        ref["last_upload_at"] = stamp
        ref.pop("reap_shard", None)
        ref.pop("reap_after", None)
        self._count(counter_shard, total_uploads=1, duplicates_avoided=1, total_s3_size_saved=upload.size)

    def adopt_copy(
        self, version: ObjectVersion, lost: FileRecord, now: datetime, *, upload_deleted: bool = False
    ) -> None:
        self.transactions += 1
        if self.faults:
            raise self.faults.pop(0)
        file = self.files.get(version.hash)
        if file is None or file.get("s3_key") != lost.s3_key or (lost.etag and file.get("etag") != lost.etag):
            raise FileChanged(_parsed(ingest_codec.file_record, file))
        claim = self.claims.get((version.bucket, version.key))
        if claim is not None:
            raise KeyClaimed(_parsed(ingest_codec.key_claim, claim))
        upload = self.uploads.get(version.upload_id) if version.upload_id is not None and not upload_deleted else None
        if version.upload_id is not None and version.upload_id not in self.uploads:
            raise UploadTaken(None)  # the adapter's claim goes on the upload item, which must exist
        if upload is not None and (
            upload.get("event_key") != version.event_key or upload.get("status") == UploadStatus.DELETED
        ):
            raise UploadTaken(_parsed(uploads_codec.upload_record, upload))
        lost_claim = (str(file.get("bucket") or version.bucket), str(file["s3_key"]))
        if self.claims.get(lost_claim, {}).get("hash", version.hash) == version.hash:
            self.claims.pop(lost_claim, None)
        file.update(s3_key=version.key, etag=version.etag, bucket=version.bucket, adopted_at=clock.iso(now))
        file.pop("state", None)
        file.pop("lost_at", None)
        self.claims[(version.bucket, version.key)] = ingest_codec.claim_item("", version.hash, clock.iso(now))
        if upload is not None:
            upload["status"] = UploadStatus.STORED.value
        self.adopted.append((version.hash, version.key))
