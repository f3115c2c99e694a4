"""POST /upload: validate the request, answer known content at once (409), else issue a presigned PUT."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.config import S3_MIN_PART, Settings
from dfd.core.conflicts import CommitRefused, PrecheckLimited, QuotaRefused
from dfd.core.errors import Forbidden, TooLarge, TooManyRequests, TransactionRetryable, ValidationFailed
from dfd.core.hashing import hex_to_b64
from dfd.core.ids import clean_filename, is_hash, new_upload_id, object_key, tenant_metadata, valid_content_type
from dfd.core.records import TenantUsage, UploadVia, holds
from dfd.core.retry import PRECHECK_READS, Backoff
from dfd.core.text import binary_size, refuse_unknown
from dfd.queries.views import tenant_file_view
from dfd.uploads.multipart import MultipartService, checked_part_size
from dfd.uploads.ports import NewUpload, PrecheckBound, PrecheckDuplicate

if TYPE_CHECKING:
    from dfd.core.objects import ObjectStore
    from dfd.identity.caller import Caller
    from dfd.uploads.ports import UploadStore

DEFAULT_CONTENT_TYPE = "application/octet-stream"
_FIELDS = {"filename", "size", "content_type", "sha256", "multipart", "part_size"}


@dataclass(frozen=True)
class UploadRequest:
    filename: str
    size: int
    content_type: str
    sha256: str | None
    multipart: bool = False  # asked for a multipart upload (dfd.uploads.multipart)
    part_size: int | None = None  # the client's part size, used when the upload is multipart


def parse_request(body: Any, max_bytes: int) -> UploadRequest:
    """Validate a POST /upload body; ValidationFailed or TooLarge (both 400)."""
    if not isinstance(body, Mapping):
        raise ValidationFailed("request body must be a JSON object")
    refuse_unknown(body, _FIELDS)  # echoed bounded and printable (dfd.core.text)
    raw_name = body.get("filename")
    if not isinstance(raw_name, str) or not 1 <= len(raw_name) <= 255:
        raise ValidationFailed("filename must be a string of 1 to 255 characters", details={"field": "filename"})
    try:
        filename = clean_filename(raw_name)
    except ValueError as error:
        raise ValidationFailed(str(error), details={"field": "filename"}) from None
    size = body.get("size")
    if isinstance(size, bool) or not isinstance(size, int):
        raise ValidationFailed("size must be an integer number of bytes", details={"field": "size"})
    if size < 1:
        raise ValidationFailed("size must be at least 1 byte", details={"field": "size"})
    if size > max_bytes:
        raise TooLarge(
            f"size {size} exceeds the largest accepted upload, {max_bytes} bytes ({binary_size(max_bytes)})",
            details={"limit": max_bytes},
        )
    content_type = body.get("content_type", DEFAULT_CONTENT_TYPE)
    if content_type is None:
        content_type = DEFAULT_CONTENT_TYPE
    if not isinstance(content_type, str) or not valid_content_type(content_type):
        raise ValidationFailed("content_type must be a MIME type like text/plain", details={"field": "content_type"})
    sha256 = body.get("sha256")
    if sha256 is not None and (not isinstance(sha256, str) or not is_hash(sha256)):
        raise ValidationFailed("sha256 must be 64 lowercase hex characters", details={"field": "sha256"})
    multipart = body.get("multipart", False)
    if not isinstance(multipart, bool):
        raise ValidationFailed("multipart must be true or false", details={"field": "multipart"})
    if multipart and size < S3_MIN_PART:
        raise ValidationFailed(f"a multipart upload has at least {S3_MIN_PART} bytes", details={"field": "multipart"})
    part_size = body.get("part_size")
    if part_size is not None:
        part_size = checked_part_size(part_size, size)
    return UploadRequest(filename, size, content_type, sha256, multipart, part_size)


def quota_exceeded(settings: Settings, refused: QuotaRefused) -> Forbidden:
    """The 403 for an upload its tenant's quota refused: which limit, and the usage it met (the usage item as the
    refused write found it)."""
    usage = refused.item or TenantUsage()
    if settings.tenant_pending_limit and usage.pending_count >= settings.tenant_pending_limit:
        kind, limit, used = "pending", settings.tenant_pending_limit, usage.pending_count
        message = f"the tenant has {used} uploads pending, the limit is {limit}: finish or abandon some first"
    else:
        kind, limit, used = "bytes", settings.tenant_quota_bytes, usage.used_bytes
        message = f"the upload would exceed the tenant's quota of {limit} bytes ({used} bytes used or pending)"
    return Forbidden(message, code="quota_exceeded", details={"limit": limit, "usage": used, "kind": kind})


@dataclass(frozen=True)
class UploadAnswer:
    status: int
    body: dict[str, Any]


class UploadService:
    def __init__(
        self,
        settings: Settings,
        repo: UploadStore,
        objects: ObjectStore,
        *,
        now: Callable[[], datetime] = clock.now,
        rng: random.Random | None = None,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._now = now
        self._rng = rng or random.Random()
        self._backoff = Backoff(rng=self._rng)
        self.multipart = MultipartService(settings, repo, objects, now=now)
        # tenant -> the precheck window this service last counted for it: which way the next count starts (a
        # guess the bound's condition checks; a wrong one costs one cancelled transaction)
        self._windows: dict[str, int] = {}

    def is_multipart(self, request: UploadRequest) -> bool:
        return self.multipart.wanted(request.size, request.multipart)

    def create(self, request: UploadRequest, caller: Caller) -> UploadAnswer:
        if request.sha256:
            duplicate = self._precheck(request, request.sha256, caller)
            if duplicate is not None:
                return duplicate
        if self.is_multipart(request):
            try:  # registered by the same register_upload: counted against the tenant's quota in the same write
                body = self.multipart.create(
                    caller,
                    filename=request.filename,
                    size=request.size,
                    content_type=request.content_type,
                    sha256=request.sha256,
                    part_size=request.part_size,
                )
            except QuotaRefused as refused:
                raise quota_exceeded(self._s, refused) from None
            return UploadAnswer(201, body)
        return self._issue(request, caller, UploadVia.PRESIGNED)

    def _precheck(self, request: UploadRequest, digest: str, caller: Caller) -> UploadAnswer | None:
        """Content the caller's TENANT holds: the caller's own upload record (duplicate), +1 on the file record
        and the tenant's reference, a duplicate avoided crediting the STORED size — in one transaction.

        Content held only by other tenants (or unknown) is not answered here: the caller must upload it (proof
        of possession) and the ingest dedups it invisibly, so the precheck is no existence oracle.

        Bounded: at most PRECHECK_LIMIT of these per tenant per PRECHECK_WINDOW_SECONDS, counted in the same
        transaction (docs/design.md, "Prechecks bounded"); beyond, 429 with Retry-After."""
        bound = self._precheck_bound(caller.tenant)
        for attempt in range(1, PRECHECK_READS + 1):
            stored, ref = self._repo.tenant_file(caller.tenant, digest)
            if stored is None or ref is None or not holds(ref) or not stored.live:
                # not held by the tenant (no reference, or one at 0), tombstoned, or lost (uploaded again: its
                # ingest adopts the new copy)
                return None
            now = self._now()
            upload = PrecheckDuplicate(
                upload_id=new_upload_id(checksummed=True),
                owner=caller.owner,
                tenant=caller.tenant,
                hash=digest,
                filename=request.filename,
                size=stored.size,
                content_type=request.content_type,
                bound=bound,
            )
            shard = self._rng.randrange(self._s.counter_shards)
            try:
                self._commit_bounded(upload, shard, now)
            except CommitRefused:
                continue  # the record or the reference changed between read and write: look again
            except TransactionRetryable:  # a concurrent transaction on one of its items: pause, then look again
                if attempt < PRECHECK_READS:
                    self._backoff(attempt)
                continue
            ref = replace(ref, upload_count=ref.upload_count + 1, last_upload_at=clock.iso(now))  # as committed
            body = {"duplicate": True, "upload_id": upload.upload_id, "file": tenant_file_view(stored, ref)}
            return UploadAnswer(409, body)
        return None

    def _commit_bounded(self, upload: PrecheckDuplicate, shard: int, now: datetime) -> None:
        """commit_precheck_duplicate, counted against the bound: a refusal that says the usage item counts
        another window (once per tenant and window) or this one (started meanwhile) is retried counted the
        other way; one that says the window is full is the 429."""
        for _ in range(3):
            try:
                self._repo.commit_precheck_duplicate(upload, counter_shard=shard, now=now)
                if upload.bound is not None:
                    if len(self._windows) > 10_000:
                        self._windows.clear()
                    self._windows[upload.tenant] = upload.bound.window
                return
            except PrecheckLimited as limited:
                bound = upload.bound
                assert bound is not None
                window = limited.item.precheck_window if limited.item is not None else None
                if window == bound.window and not bound.fresh:
                    raise self._too_many_prechecks(bound) from None
                upload = replace(upload, bound=replace(bound, fresh=window != bound.window))
        raise CommitRefused(None, "the precheck bound's window kept changing")

    def _precheck_bound(self, tenant: str) -> PrecheckBound | None:
        """This window's bound; counted as the window's first unless this service counted it already (the first
        precheck of a tenant in a window is the common case: it then costs no extra transaction)."""
        if not self._s.precheck_limit:
            return None
        window = int(self._now().timestamp()) // self._s.precheck_window_seconds
        return PrecheckBound(window=window, limit=self._s.precheck_limit, fresh=self._windows.get(tenant) != window)

    def _too_many_prechecks(self, bound: PrecheckBound) -> TooManyRequests:
        seconds = self._s.precheck_window_seconds
        retry_after = max(1, (bound.window + 1) * seconds - int(self._now().timestamp()))
        return TooManyRequests(
            f"the tenant had {bound.limit} duplicates answered without an upload in this {seconds} s window: "
            f"upload the bytes (POST /upload without sha256) or ask again in {retry_after} s",
            code="too_many_prechecks",
            details={"limit": bound.limit, "window_seconds": seconds, "retry_after": retry_after},
        )

    def _issue(self, request: UploadRequest, caller: Caller, via: UploadVia) -> UploadAnswer:
        now = self._now()
        upload_id = new_upload_id(checksummed=request.sha256 is not None)
        key = object_key(self._s.upload_prefix, upload_id)
        expires_in = self._s.upload_url_expires
        url, headers = self._objects.presign_put(
            self._s.bucket,
            key,
            size=request.size,
            content_type=request.content_type,
            checksum_b64=hex_to_b64(request.sha256) if request.sha256 else None,
            expires_in=expires_in,
            metadata=tenant_metadata(caller.tenant),  # the ingest's tenant hint (dfd.core.ids)
        )
        expires_at = clock.plus(now, seconds=expires_in)
        upload = NewUpload(
            upload_id,
            request.filename,
            request.size,
            request.content_type,
            request.sha256,
            key,
            self._s.bucket,
            expires_at,
            owner=caller.owner,
            tenant=caller.tenant,
            via=via,
        )
        try:
            self._repo.register_upload(upload, now)  # counted against the tenant's quota in the same write
        except QuotaRefused as refused:
            raise quota_exceeded(self._s, refused) from None
        return UploadAnswer(
            201,
            {
                "upload_id": upload_id,
                "multipart": False,
                "upload_url": url,
                "method": "PUT",
                "headers": headers,
                "key": key,
                "bucket": self._s.bucket,
                "expires_in": expires_in,
                "expires_at": clock.iso(expires_at),
            },
        )

    def create_single(self, request: UploadRequest, caller: Caller, *, via: UploadVia) -> UploadAnswer:
        """The registration `create` makes for content to send, always as one presigned PUT (Git LFS's `basic`
        transfer cannot send parts), without the precheck: the caller answers content the tenant holds itself and
        keeps the request at or under S3's largest PUT. Content held meanwhile is sent and deduplicated by the
        ingest, as after any upload. `via`: the caller's path (the upload record's, dfd.core.records.UploadVia)."""
        assert not request.multipart
        return self._issue(request, caller, via)
