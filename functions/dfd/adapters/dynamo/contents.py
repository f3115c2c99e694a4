"""The contents aggregate: the ingest's commits (new content, duplicate, resurrection — one skeleton) and an event
recorded on its own. The precheck's duplicate is in :mod:`.precheck`, a lost copy's adoption in :mod:`.adoption`,
the reference items they share in :mod:`.references`.

Every commit is ONE transaction keyed on the event and the content: the event record (its identity: a lost
response, retried, finds it exactly as written) — the upload finished, which carries it, or for an object with
no upload an item of its own —, the file record, the key's claim, the uploader's tenant reference and usage, one
counter shard."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import (
    Plan,
    Refusal,
    Request,
    already_put,
    condition_failed,
    to_attr,
    to_item,
    translate,
)
from dfd.adapters.dynamo.references import References
from dfd.core import clock, usage
from dfd.core import codec as core_codec
from dfd.core.conflicts import (
    CommitRefused,
    EventRecorded,
    FileAppeared,
    FileChanged,
    FileIsThisObject,
    FileVanished,
    KeyClaimed,
    PendingReleased,
    QuotaRefused,
    ReapPending,
    TenantRefChanged,
    UploadTaken,
)
from dfd.core.ids import key_claim
from dfd.core.records import FileRecord, UploadRecord, UploadStatus
from dfd.ingest import codec as ingest_codec
from dfd.uploads import codec as uploads_codec

if TYPE_CHECKING:
    from dfd.ingest.ports import ObjectVersion, TenantShare

_DELETED = UploadStatus.DELETED.value


@dataclass(frozen=True, slots=True)
class _Made:
    """What every ingest commit is given: the object version, its upload's filename and type, and the rest."""

    version: ObjectVersion
    filename: str
    content_type: str
    counter_shard: int
    now: datetime
    tenant: TenantShare | None


class Contents(References):
    def record_event(self, version: ObjectVersion, outcome: str, now: datetime) -> bool:
        item = to_item(self._event_item(version, outcome, now))
        try:
            self._db.put_item(
                TableName=self._s.events_table,
                Item=item,
                ConditionExpression="attribute_not_exists(event_key)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as error:
            if already_put(error, item):
                return True  # our own put, applied before its response was lost
            if condition_failed(error):
                return False
            raise translate(error, "PutItem") from error
        return True

    def record_rejected_event(self, version: ObjectVersion, now: datetime, *, counter_shard: int) -> bool:
        """One TransactWriteItems: the event record `rejected` where none is, and `rejected_uploads` +1 on the
        counter shard (the condition keeps a replay from counting again)."""
        plan = Plan(identity="event")
        event = self._event_item(version, UploadStatus.REJECTED.value, now)
        plan.add("event", self._put_new(self._s.events_table, event, "event_key"), EventRecorded)
        plan.add("counters", self._add_counters_item(counter_shard, {"rejected_uploads": 1}))
        try:
            self._run(plan)
        except EventRecorded:
            return False
        return True

    # ---------------------------------------------------------------- the ingest's commits
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
        stamp = clock.iso(now)
        created = ingest_codec.new_file_item(version, filename, content_type, stamp, incarnation=secrets.token_hex(8))
        file = self._put_new(self._s.files_table, created, "hash")
        deltas = {"total_uploads": 1, "total_files": 1, "total_bytes_stored": version.size}
        made = _Made(version, filename, content_type, counter_shard, now, tenant)
        self._commit(made, "stored", (file, FileAppeared), claims=True, status=UploadStatus.STORED, deltas=deltas)

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
        def file_changed(item: FileRecord | None) -> CommitRefused:
            if item is None:
                return FileVanished(None)
            return FileIsThisObject(item) if item.s3_key == version.key else FileChanged(item)

        counted = self._count_duplicate_file_item(version.hash, version.key, clock.iso(now), lost_too=True)
        # physically a duplicate; for an uploader whose tenant did not hold the content, its upload is stored
        status = UploadStatus.STORED if tenant is not None and not tenant.held else UploadStatus.DUPLICATE
        deltas = {"total_uploads": 1, "duplicates_avoided": 1, "total_s3_size_saved": version.size}
        # never claims the key: never delete bytes some record stores there
        made = _Made(version, filename, content_type, counter_shard, now, tenant)
        self._commit(made, "duplicate", (counted, file_changed), claims=False, status=status, deltas=deltas)

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
        generation = tombstoned.generation

        def file_changed(item: FileRecord | None) -> CommitRefused:
            if item is None:
                return FileVanished(None)
            if item.tombstoned and item.generation == generation:
                return ReapPending(item)
            return FileChanged(item)

        file = {
            "Update": {
                "TableName": self._s.files_table,
                "Key": to_item(ingest_codec.file_key(version.hash)),
                # the tombstoned generation's object goes to the reaper (tombstone_shard/reap_after stay: the
                # reaper finds it after the grace period); this object is the new generation's canonical copy (a
                # `lost` mark goes: this copy exists)
                "UpdateExpression": "SET #gen = :next, s3_key = :key, #bucket = :bucket, etag = :etag,"
                " reap_key = :old_key, reap_etag = :old_etag, live_refs = :one, last_upload_at = :now,"
                " stores = if_not_exists(stores, :one) + :one ADD upload_count :one REMOVE #state, lost_at",
                "ConditionExpression": "live_refs = :zero AND #gen = :gen AND s3_key = :old_key"
                " AND attribute_not_exists(reap_key)",
                "ExpressionAttributeNames": {"#state": "state", "#gen": "generation", "#bucket": "bucket"},
                "ExpressionAttributeValues": {
                    ":zero": to_attr(0),
                    ":gen": to_attr(generation),
                    ":next": to_attr(generation + 1),
                    ":key": to_attr(version.key),
                    ":bucket": to_attr(version.bucket),
                    ":etag": to_attr(version.etag),
                    ":one": to_attr(1),
                    ":now": to_attr(clock.iso(now)),
                    ":old_key": to_attr(tombstoned.s3_key),
                    ":old_etag": to_attr(tombstoned.etag or ""),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        deltas = {"total_uploads": 1}
        made = _Made(version, filename, content_type, counter_shard, now, tenant)
        self._commit(made, "stored", (file, file_changed), claims=True, status=UploadStatus.STORED, deltas=deltas)

    def _commit(
        self,
        made: _Made,
        outcome: str,
        file: tuple[Request, Refusal],
        *,
        claims: bool,
        status: UploadStatus,
        deltas: Mapping[str, int],
    ) -> None:
        """The one skeleton of the ingest's commits: the event (`outcome`), the file record's change (`file`: the
        request and what its refusal means), the key claimed (`claims`: this object is the stored copy) or
        conditioned on no claim, the upload finished as `status`, the tenant's reference and usage, and `deltas`
        on one counter shard."""
        version, filename, content_type, now, tenant = (
            made.version,
            made.filename,
            made.content_type,
            made.now,
            made.tenant,
        )
        stamp = clock.iso(now)
        # the nonce of this one request: a retry of it (botocore resends it) finds its own event, a concurrent
        # delivery of the same version — whose event would otherwise be identical, down to the second — another's
        commit = secrets.token_hex(8)
        if version.upload_id is not None:
            # the upload item carries the event and the key's claim: one item, not three. No claim there is
            # implied by no event (a claim comes with the event of the version stored at the key, or after it)
            plan = Plan(identity="event", mark={"event_key": version.event_key, "commit": commit})
            finished = UploadStatus(outcome)
            self._add_finish_upload(
                plan, version, status, finished, filename, content_type, stamp, tenant, commit, claims=claims
            )
            plan.add("file", *file)
        else:
            event = self._event_item(version, outcome, now) | {"commit": commit}
            plan = Plan(identity="event")
            plan.add("event", self._put_new(self._s.events_table, event, "event_key"), EventRecorded)
            plan.add("file", *file)
            if claims:
                plan.add("claim", self._put_claim_item(version.bucket, version.key, version.hash, stamp), KeyClaimed)
            else:
                plan.add("claim", self._no_claim_item(key_claim(version.bucket, version.key)), KeyClaimed)
        if tenant is not None:
            first = ingest_codec.first_reference(version, filename, content_type, stamp)
            plan.add("tenant", self._tenant_ref_item(tenant, version.hash, first, stamp), TenantRefChanged)
            self._add_usage_moves(plan, tenant, version)
        plan.add("counters", self._add_counters_item(made.counter_shard, deltas))
        self._run(plan)

    def _event_item(self, version: ObjectVersion, outcome: str, now: datetime) -> core_codec.Item:
        """The event record of an object with no upload (the commits add their nonce, `commit`)."""
        ttl = clock.epoch(clock.plus(now, days=self._s.event_ttl_days))
        return ingest_codec.event_item(version, outcome, now, ttl)

    # ---------------------------------------------------------------- the commits' items
    def _add_finish_upload(
        self,
        plan: Plan,
        version: ObjectVersion,
        status: UploadStatus,
        outcome: UploadStatus,
        filename: str,
        content_type: str,
        stamp: str,
        tenant: TenantShare | None,
        commit: str,
        *,
        claims: bool,
    ) -> None:
        """The upload processed by this event, carrying its event record (the plan's identity, role `event`) and,
        when this object becomes the content's copy (`claims`), its key's claim: its fields set, `filename`,
        `content_type` and `created_at` only where absent; out of the pending index and the quota's pending count
        (`quota_bytes`: when the commit releases them they must still be there). Refused when an object version
        already processed it — this one (the event is recorded: a replay), or another: its key claimed by the
        copy stored there, or a second PUT with the same URL — or it was deleted (cancelled: it stays so)."""
        assert version.upload_id is not None
        releasing = tenant is not None and tenant.pending_bytes > 0
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        parts: list[str] = []
        fields = ingest_codec.processed_upload(version, status, outcome, stamp, commit)
        if claims:
            fields |= {ingest_codec.CLAIM_HASH: version.hash, "claimed_at": stamp}
        for i, (name, value) in enumerate(fields.items()):
            names[f"#f{i}"] = name
            values[f":f{i}"] = to_attr(value)
            parts.append(f"#f{i} = :f{i}")
        # an upload with no tenant has no registration: an object put straight at an upload key (this commit
        # creates its item)
        defaults = ingest_codec.upload_defaults(
            filename, content_type, stamp, registered=tenant is not None, commit=commit
        )
        for i, (name, value) in enumerate(defaults.items()):
            names[f"#d{i}"] = name
            values[f":d{i}"] = to_attr(value)
            parts.append(f"#d{i} = if_not_exists(#d{i}, :d{i})")
        request = {
            "Update": {
                "TableName": self._s.uploads_table,
                "Key": to_item(uploads_codec.upload_key(version.upload_id)),
                "UpdateExpression": "SET " + ", ".join(parts) + " REMOVE pending_shard, #ttl, quota_bytes",
                "ConditionExpression": "attribute_not_exists(#ek) AND (attribute_not_exists(#del) OR #del <> :del)"
                + (" AND attribute_exists(quota_bytes)" if releasing else ""),
                "ExpressionAttributeNames": {**names, "#ttl": "ttl", "#ek": "event_key", "#del": "status"},
                "ExpressionAttributeValues": {**values, ":del": to_attr(_DELETED)},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

        def recorded(item: core_codec.Item | None) -> CommitRefused | None:
            event = ingest_codec.upload_event(item)
            if event is not None and event.event_key == version.event_key:
                return EventRecorded(event)  # this version committed before (another delivery of it)
            return None  # the upload's own refusal, at its precedence (after the claim and the file)

        def refused(item: UploadRecord | None) -> CommitRefused:
            if releasing and item is not None and item.event_key is None:
                return PendingReleased(item)  # not taken: the reconcile released its quota bytes meanwhile
            return UploadTaken(item)

        def claimed(item: core_codec.Item | None) -> CommitRefused | None:
            claim = ingest_codec.upload_claim(item)
            return KeyClaimed(claim) if claim is not None else None

        plan.add("event", request, recorded, parse=lambda item: item)
        plan.alias("claim", "event", claimed, parse=lambda item: item)
        plan.alias("upload", "event", refused)

    def _add_usage_moves(self, plan: Plan, tenant: TenantShare, version: ObjectVersion) -> None:
        """An ingest's commit on the uploader's usage item: the pending upload's bytes leave `pending` and, when
        the commit creates the tenant's reference item, its size joins `stored` (stored_bytes = the sizes of the
        tenant's reference items that exist: a content counts once per tenant; a reference at 0 taken over is
        counted already, the reaper subtracts it when it deletes one). Conditioned only for a share `released`
        (its upload's pending bytes released before: failed, expired) that adds bytes with a quota set: on the gate,
        as a registration's count (dfd.adapters.dynamo.uploads), the bytes it adds within the quota less what the
        other shards hold (QuotaRefused). Otherwise an object already uploaded is never refused for a quota (the
        reference's own condition says whether it is created)."""
        stored = 0 if tenant.counted else version.size
        deltas = {"stored_bytes": stored, "used_bytes": stored - tenant.pending_bytes}
        if tenant.pending_bytes:
            deltas |= {"pending_count": -1 if tenant.pending_counted else 0, "pending_bytes": -tenant.pending_bytes}
        deltas = {name: delta for name, delta in deltas.items() if delta}
        if not deltas:
            return
        quota = self._s.tenant_quota_bytes
        if not (tenant.released and stored > 0 and quota):
            plan.add("usage", self._add_usage_item(tenant.tenant, deltas))
            return
        shard = usage.gate(tenant.tenant)
        others = usage.total(found for other, found in self._usage_shards(tenant.tenant).items() if other != shard)
        held = self._add_usage_item(
            tenant.tenant,
            deltas,
            shard=shard,
            ConditionExpression="attribute_not_exists(#used) OR #used <= :room",
            ExpressionAttributeNames={"#used": core_codec.USAGE_ATTRS["used_bytes"]},
            ExpressionAttributeValues={":room": to_attr(quota - others.used_bytes - stored)},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        plan.add("usage", held, QuotaRefused)

    def _no_claim_item(self, claim: str) -> Request:
        """Condition: no stored object lives at this key (one with no upload id)."""
        return {
            "ConditionCheck": {
                "TableName": self._s.events_table,
                "Key": to_item(ingest_codec.event_key(claim)),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
