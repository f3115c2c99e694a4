"""The in-memory tables the fake repository's aggregates share, and the model's rules: how a transaction applies all
its writes or none, raising the adapter's typed conflict of the first failed condition."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from dfd.core import clock
from dfd.core import codec as core_codec
from dfd.core.config import Settings
from dfd.core.conflicts import (
    CommitRefused,
    EventRecorded,
    KeyClaimed,
    PendingReleased,
    QuotaRefused,
    TenantRefChanged,
    UploadTaken,
)
from dfd.core.records import (
    EventRecord,
    UploadStatus,
    counts_stored,
    holds,
)
from dfd.ingest import codec as ingest_codec
from dfd.ingest.ports import ObjectVersion, TenantShare
from dfd.uploads import codec as uploads_codec

Item = dict[str, Any]
R = TypeVar("R")


def _parsed(parse: Callable[[Item], R], item: Mapping[str, Any] | None) -> R | None:
    """The record of a stored item (None: absent), as the adapter parses it — a copy: the model's item stays."""
    return None if item is None else parse(copy.deepcopy(dict(item)))


class FakeTables:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.files: dict[str, Item] = {}
        self.uploads: dict[str, Item] = {}
        self.events: dict[str, Item] = {}
        self.claims: dict[tuple[str, str], Item] = {}
        self.tenant_refs: dict[tuple[str, str], Item] = {}  # (tenant, hash) -> the tenant's reference
        self.counters: dict[int, dict[str, int]] = {}
        self.usage: dict[str, dict[str, int]] = {}  # tenant -> its usage item (the adapter's shards summed in one)
        self.prechecks: dict[str, dict[str, int]] = {}  # tenant -> its precheck bound's item (precheck#<tenant>)
        self.lease: Item = {}  # the reconcile's lease item (lease#reconcile)
        self.snapshot_items: dict[tuple[str, int], Item] = {}  # (series, at) -> a snapshot's item (dfd.history.codec)
        self.snapshot_writes = 0
        self.faults: list[Exception] = []
        self.after_state: Callable[[], None] | None = None
        self.after_tenant_file: Callable[[], None] | None = None
        self.transactions = 0  # attempted (faults included)
        self.committed = 0
        self.state_reads: list[str | None] = []  # each ingest_state's tenant hint (None: no reference read)
        self.adopted: list[tuple[str, str]] = []  # (hash, the key that became its stored copy)
        self.nonces = 0  # the commits' nonces (the adapter's are random)

    # ---------------------------------------------------------------- the model's rules
    def _begin(self, counter_shard: int) -> None:
        self.transactions += 1
        assert 0 <= counter_shard < self.settings.counter_shards, counter_shard
        if self.faults:
            raise self.faults.pop(0)

    def _begin_commit(
        self,
        version: ObjectVersion,
        counter_shard: int,
        *,
        claims: bool,
        file: CommitRefused | None,
        tenant: TenantShare | None,
    ) -> None:
        """Every condition of an ingest's commit; the first failed one in the adapter's order (event, claim, file,
        upload, tenant) wins. `claims`: the commit claims the key (else: conditioned on no claim there)."""
        self._begin(counter_shard)
        claim = self.claims.get((version.bucket, version.key))
        # the event's condition: on the upload item that carries it (an object at an upload key), else on its own
        event: EventRecord | None = None
        upload_refused: CommitRefused | None = None
        if version.upload_id is not None:
            upload = self.uploads.get(version.upload_id)
            record = _parsed(uploads_codec.upload_record, upload)
            event = self._carried_event(version.event_key)
            releasing = tenant is not None and tenant.pending_bytes > 0
            if record is not None:
                if record.event_key is not None or record.status == UploadStatus.DELETED:
                    upload_refused = UploadTaken(record)
                elif releasing and upload is not None and "quota_bytes" not in upload:
                    upload_refused = PendingReleased(record)
            elif releasing:
                upload_refused = UploadTaken(None)  # `attribute_exists(quota_bytes)` fails on a missing record
        elif version.event_key in self.events:
            event = ingest_codec.event_record(copy.deepcopy(self.events[version.event_key]))
        for refused in (
            EventRecorded(event) if event is not None else None,
            KeyClaimed(ingest_codec.key_claim(copy.deepcopy(claim))) if claim is not None else None,
            file,
            upload_refused,
            self._tenant_refused(tenant, version.hash),
            self._quota_refused(tenant, version.size),
        ):
            if refused is not None:
                raise refused

    def _quota_refused(self, tenant: TenantShare | None, size: int) -> QuotaRefused | None:
        """The adapter's condition on the usage item of a share `released`: the bytes the commit adds (a reference
        created) within the tenant's quota, as a registration's."""
        quota = self.settings.tenant_quota_bytes
        if tenant is None or not tenant.released or tenant.counted or not size or not quota:
            return None
        item = self.usage.get(tenant.tenant)
        if core_codec.tenant_usage(item).used_bytes + size > quota:
            return QuotaRefused(_parsed(core_codec.tenant_usage, item))
        return None

    def _tenant_refused(self, tenant: TenantShare | None, digest: str) -> CommitRefused | None:
        """The tenant reference's condition: absent, at 0 or held (the item exists with a count above 0) exactly as
        read or assumed."""
        if tenant is None:
            return None
        ref = _parsed(ingest_codec.tenant_ref, self.tenant_refs.get((tenant.tenant, digest)))
        if (tenant.held, tenant.counted) != (holds(ref), counts_stored(ref)):
            return TenantRefChanged(ref)
        return None

    def _commit(
        self,
        version: ObjectVersion,
        outcome: str,
        status: UploadStatus,
        filename: str,
        content_type: str,
        now: datetime,
        tenant: TenantShare | None,
    ) -> None:
        """What every ingest commit writes besides the file record: the event, the key's claim (when the file record
        names this object), the upload finished, the tenant's reference and usage."""
        stamp = clock.iso(now)
        if version.upload_id is None:  # else the upload item carries it (_finish_upload)
            self.events[version.event_key] = self._event(version, outcome, now)
        if self.files[version.hash].get("s3_key") == version.key:
            self.claims[(version.bucket, version.key)] = ingest_codec.claim_item("", version.hash, stamp)
        self._finish_upload(
            version, status, UploadStatus(outcome), filename, content_type, stamp, registered=tenant is not None
        )
        self._add_tenant_ref(tenant, version, filename, content_type, stamp)

    def _count_duplicate(self, file: Item, now: datetime) -> None:
        file["upload_count"] = file.get("upload_count", 0) + 1
        file["live_refs"] = file.get("live_refs", 0) + 1
        file["last_upload_at"] = clock.iso(now)

    def _add_tenant_ref(
        self, tenant: TenantShare | None, version: ObjectVersion, filename: str, content_type: str, stamp: str
    ) -> None:
        if tenant is None:
            return
        stored = 0 if tenant.counted else version.size  # the adapter's _add_usage_moves: a reference item created
        if tenant.pending_bytes:
            self._move(tenant.tenant, pending_count=-int(tenant.pending_counted), pending_bytes=-tenant.pending_bytes)
        self._move(tenant.tenant, stored_bytes=stored, used_bytes=stored - tenant.pending_bytes)
        ref = self.tenant_refs.setdefault(
            (tenant.tenant, version.hash), dict(ingest_codec.tenant_ref_key(tenant.tenant, version.hash))
        )
        for name, value in ingest_codec.first_reference(version, filename, content_type, stamp).items():
            if value is not None:  # a new reference (none, or one at 0) takes them anew; a held one keeps its own
                ref[name] = ref.get(name, value) if tenant.held else value
        ref["upload_count"] = ref.get("upload_count", 0) + 1
        ref["last_upload_at"] = stamp
        ref.pop("reap_shard", None)
        ref.pop("reap_after", None)

    def _event(self, version: ObjectVersion, outcome: str, now: datetime) -> Item:
        return ingest_codec.event_item(
            version, outcome, now, clock.epoch(clock.plus(now, days=self.settings.event_ttl_days))
        )

    def _finish_upload(
        self,
        version: ObjectVersion,
        status: UploadStatus,
        outcome: UploadStatus,
        filename: str,
        content_type: str,
        stamp: str,
        *,
        registered: bool,
    ) -> None:
        if version.upload_id is None:
            return
        upload = self.uploads.setdefault(version.upload_id, dict(uploads_codec.upload_key(version.upload_id)))
        self.nonces += 1
        commit = f"{self.nonces:016x}"
        upload.update(ingest_codec.processed_upload(version, status, outcome, stamp, commit))
        defaults = ingest_codec.upload_defaults(filename, content_type, stamp, registered=registered, commit=commit)
        for name, value in defaults.items():
            upload.setdefault(name, value)
        for name in ("pending_shard", "ttl", "quota_bytes"):
            upload.pop(name, None)

    def _count(self, shard: int, **deltas: int) -> None:
        self._add_counters(shard, **deltas)
        self.committed += 1

    def _add_counters(self, shard: int, **deltas: int) -> None:
        """ADD the deltas to one counter shard (a rejection's count: no commit of its own)."""
        assert 0 <= shard < self.settings.counter_shards, shard
        totals = self.counters.setdefault(shard, {})
        for name, delta in deltas.items():
            totals[name] = totals.get(name, 0) + delta
