"""The reads (dfd.adapters.dynamo.reads): the shared read ports of dfd.core.reads and each feature's reads."""

from __future__ import annotations

import copy

from dfd.core import codec as core_codec
from dfd.core.ids import upload_id_of_event
from dfd.core.records import (
    COUNTER_FIELDS,
    EventRecord,
    FileRecord,
    KeyClaim,
    TenantRef,
    TenantUsage,
    UploadRecord,
)
from dfd.ingest import codec as ingest_codec
from dfd.ingest.ports import IngestState
from dfd.uploads import codec as uploads_codec
from tests.unit.fakes.base import FakeTables, _parsed


class FakeReads(FakeTables):
    # ---------------------------------------------------------------- reads
    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        self.state_reads.append(tenant_hint if upload_id is not None else None)
        ref = self.tenant_refs.get((tenant_hint, digest)) if upload_id is not None and tenant_hint else None
        state = IngestState(  # the adapter's read: the event its upload carries, else (no upload) its own item
            self._carried_event(event_key) if upload_id is not None else self.get_event(event_key),
            self.get_file(digest),
            self.get_upload(upload_id) if upload_id is not None else None,
            _parsed(ingest_codec.tenant_ref, ref),
        )
        hook, self.after_state = self.after_state, None
        if hook is not None:
            hook()
        return state

    def get_file(self, digest: str, *, consistent: bool = False) -> FileRecord | None:
        return _parsed(ingest_codec.file_record, self.files.get(digest))

    def get_upload(self, upload_id: str) -> UploadRecord | None:
        return _parsed(uploads_codec.upload_record, self.uploads.get(upload_id))

    def get_event(self, event_key: str) -> EventRecord | None:
        carried = self._carried_event(event_key)
        return carried if carried is not None else _parsed(ingest_codec.event_record, self.events.get(event_key))

    def _carried_event(self, event_key: str) -> EventRecord | None:
        """The event record the upload item of its object carries (the adapter's ingest commits write it there)."""
        upload_id = upload_id_of_event(self.settings.upload_prefix, event_key)
        event = ingest_codec.upload_event(copy.deepcopy(self.uploads.get(upload_id or "")))
        return event if event is not None and event.event_key == event_key else None

    def get_claim(self, bucket: str, key: str) -> KeyClaim | None:
        return _parsed(ingest_codec.key_claim, self.claims.get((bucket, key)))

    def tenant_file(
        self, tenant: str, digest: str, *, consistent: bool = True
    ) -> tuple[FileRecord | None, TenantRef | None]:
        found = self.get_file(digest), _parsed(ingest_codec.tenant_ref, self.tenant_refs.get((tenant, digest)))
        hook, self.after_tenant_file = self.after_tenant_file, None
        if hook is not None:
            hook()
        return found

    def counter_totals(self, *, consistent: bool = False) -> dict[str, int]:
        totals = dict.fromkeys(COUNTER_FIELDS, 0)
        for shard in self.counters.values():
            for name in COUNTER_FIELDS:
                totals[name] += shard.get(name, 0)
        return totals

    def tenant_usage(self, tenant: str, *, consistent: bool = True) -> TenantUsage:
        return core_codec.tenant_usage(self.usage.get(tenant))

    def scan_files(
        self, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[FileRecord], dict[str, str] | None]:
        after = (start_key or {}).get("hash", "")
        rest = [self.files[h] for h in sorted(self.files) if h > after]
        page = [ingest_codec.file_record(copy.deepcopy(item)) for item in rest[:limit]]
        return page, ({"hash": page[-1].hash} if len(rest) > limit else None)

    def owner_uploads(
        self, owner: str, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[UploadRecord], dict[str, str] | None]:
        mine = sorted(
            (u for u in self.uploads.values() if u.get("owner") == owner and u.get("created_at")),
            key=lambda u: (u["created_at"], u["upload_id"]),
            reverse=True,
        )
        if start_key:
            after = (start_key["created_at"], start_key["upload_id"])
            mine = [u for u in mine if (u["created_at"], u["upload_id"]) < after]
        page = [uploads_codec.upload_record(copy.deepcopy(item)) for item in mine[:limit]]
        last = page[-1] if page and len(mine) > limit else None
        return page, (
            {"owner": owner, "created_at": str(last.created_at), "upload_id": last.upload_id} if last else None
        )
