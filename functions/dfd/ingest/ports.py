"""What the ingest reads and commits through the repository (the contents aggregate: dfd.adapters.dynamo.contents
and .reads): one consistent read, the object version it hashed, the uploader's tenant's share."""

from __future__ import annotations

from dataclasses import dataclass

from dfd.core.records import EventRecord, FileRecord, TenantRef, UploadRecord, counts_stored, holds


@dataclass(frozen=True)
class IngestState:
    """What the ingest decision reads first: this version's event record, the file record for its content,
    its upload record, and the hinted tenant's reference to the content (each None when absent; the reference
    is read only with a tenant hint and an upload id). For an object at an upload key the event is the one its
    upload record carries (the version that processed it); the record of another version there (rejected,
    conflict, canonical: rare) is not read first — the commit's refusal and record_event's answer find it."""

    event: EventRecord | None
    file: FileRecord | None
    upload: UploadRecord | None
    tenant_ref: TenantRef | None = None


@dataclass(frozen=True)
class ObjectVersion:
    """One object version as the ingest identified and hashed it."""

    event_key: str
    bucket: str
    key: str
    etag: str
    size: int
    hash: str
    upload_id: str | None


@dataclass(frozen=True)
class TenantShare:
    """Whose upload an ingest records: the uploader's tenant, and its reference to the content as the ingest read
    (or assumed) it — `held`: the item exists with a count above 0 (dfd.core.records.holds); `counted`: the item exists
    at all, at any count (dfd.core.records.counts_stored: its size is in the tenant's `stored_bytes`). A reference at 0
    is counted and not held; a held one is always counted. The commit is conditioned on exactly that: absent, at
    0, or held."""

    tenant: str
    held: bool
    counted: bool
    # the bytes the upload holds against its tenant's quota while pending (its record's `quota_bytes`): the commit
    # releases them (0: nothing pending to release: released by the reconcile already)
    pending_bytes: int = 0

    def __post_init__(self) -> None:
        if self.held and not self.counted:
            raise ValueError("a held reference exists: it is counted")

    @classmethod
    def of(cls, tenant: str, ref: TenantRef | None, pending_bytes: int = 0) -> TenantShare:
        """The share as the tenant's reference item read says (None: absent)."""
        return cls(tenant, held=holds(ref), counted=counts_stored(ref), pending_bytes=pending_bytes)
