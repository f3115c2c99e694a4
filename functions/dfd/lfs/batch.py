"""Git LFS Batch API (git-lfs docs/api/batch.md): `basic` transfer, sha256, on dfd's own uploads.

``POST /lfs/<repo>/objects/batch``. Objects belong to the caller's TENANT, shared by all its repositories:

* upload — an oid the tenant holds with that size: the object without ``actions`` (nothing to send), and nothing
  written: no upload record, no duplicate avoided counted, no reference taken (a push that sends nothing is no
  upload: re-pushing a branch leaves My uploads, the counters and the quota as they were). Anything else —
  content only other tenants hold included, answered exactly like unknown content — is an ordinary dfd upload
  registered by UploadService (same record, quota, ingest, dedup, reaper): ``actions.upload`` is its presigned
  PUT, whose ``header`` carries every signed header (Content-Type above all: git-lfs would sniff one) and
  ``actions.verify`` points at ``/lfs/<repo>/verify/<upload id>``.
* verify — 200 once the upload is processed: if the S3 event has not been ingested yet, the verify runs the
  same idempotent ingest on the object itself, so the oid is the tenant's from the 200 on.
* download — a presigned GET for every oid the tenant holds; any other → per-object 404, the same answer
  whether or not another tenant holds it.

Per-object 422: malformed oid, size not a positive integer, a size other than the one the tenant holds, above
5 GiB (S3's largest PUT, `basic` cannot send parts) or the deployment's MaxUploadBytes. Response-level: 413 over
MAX_OBJECTS objects, 422 for a malformed request, 409 for a hash_algo other than sha256, 507 when the objects to
upload exceed the tenant's quota (nothing registered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.config import S3_MAX_PUT, Settings
from dfd.core.errors import Forbidden
from dfd.core.notifications import ObjectRef
from dfd.core.records import FileRecord, UploadStatus, UploadVia, holds
from dfd.lfs.request import OID, LfsError, body_object
from dfd.uploads.service import DEFAULT_CONTENT_TYPE, UploadRequest, UploadService

if TYPE_CHECKING:
    from dfd.core.objects import ObjectStore
    from dfd.identity.caller import Caller
    from dfd.lfs.ports import LfsStore

MAX_OBJECTS = 100  # objects per batch request (git-lfs sends 100 at most: lfs.tq batch size)
MEDIA_TYPE = "application/vnd.git-lfs+json"


@dataclass(frozen=True, slots=True)
class LfsObject:
    oid: str
    size: int


def _object_error(raw: Any) -> tuple[str, int, str | None]:
    """(oid, size as given, or the reason the object is malformed)."""
    if not isinstance(raw, Mapping):
        return "", 0, "an object must be a JSON object with oid and size"
    oid, size = raw.get("oid"), raw.get("size")
    shown_oid = oid if isinstance(oid, str) else ""
    shown_size = size if isinstance(size, int) and not isinstance(size, bool) else 0
    if not isinstance(oid, str) or not OID.fullmatch(oid):
        return shown_oid[:64], shown_size, "oid must be a SHA-256: 64 lowercase hex characters"
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return oid, shown_size, "size must be a non-negative integer number of bytes"
    return oid, size, None


def parse_object(raw: Any) -> LfsObject:
    """A verify body's object; LfsError 422 for anything else."""
    oid, size, problem = _object_error(raw)
    if problem:
        raise LfsError(422, problem)
    return LfsObject(oid, size)


def _check_options(body: Mapping[str, Any]) -> None:
    """The batch request's optional fields: absent, or of the spec's type (null is malformed, as for git-lfs,
    which omits what it does not send); 422 for a malformed one, 409 for a hash algorithm other than sha256."""
    if "transfers" in body:
        transfers = body["transfers"]
        if not isinstance(transfers, list) or not all(isinstance(name, str) for name in transfers):
            raise LfsError(422, "transfers must be a list of transfer adapter names")
        if "basic" not in transfers:
            raise LfsError(422, "this server speaks only the basic transfer")
    hash_algo = body.get("hash_algo", "sha256")
    if not isinstance(hash_algo, str):
        raise LfsError(422, "hash_algo must be a string")
    if hash_algo != "sha256":
        raise LfsError(409, f"this server supports only the sha256 hash algorithm, not {hash_algo[:32]!r}")


def _failed(oid: str, size: int, code: int, message: str) -> dict[str, Any]:
    return {"oid": oid, "size": size, "error": {"code": code, "message": message}}


class LfsService:
    def __init__(
        self,
        settings: Settings,
        repo: LfsStore,
        objects: ObjectStore,
        uploads: UploadService,
        ingest: Callable[[ObjectRef], object],
        *,
        max_objects: int = MAX_OBJECTS,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._uploads = uploads
        self._ingest = ingest
        self._max_objects = max_objects

    # ------------------------------------------------------------------ batch
    def batch(self, caller: Caller, repo: str, raw_body: Any, base_url: str) -> dict[str, Any]:
        body = body_object(raw_body)
        operation = body.get("operation")
        if operation not in ("upload", "download"):
            raise LfsError(422, 'operation must be "upload" or "download"')
        _check_options(body)
        raw_objects = body.get("objects")
        if not isinstance(raw_objects, list):
            raise LfsError(422, "objects must be a list")
        if len(raw_objects) > self._max_objects:
            raise LfsError(
                413, f"a batch request names at most {self._max_objects} objects, this one {len(raw_objects)}"
            )
        answers: list[dict[str, Any]] = []
        valid: list[tuple[int, LfsObject]] = []
        for index, raw in enumerate(raw_objects):
            oid, size, problem = _object_error(raw)
            answers.append(_failed(oid, size, 422, problem) if problem else {"oid": oid, "size": size})
            if not problem:
                valid.append((index, LfsObject(oid, size)))
        if operation == "download":
            self._download(caller, valid, answers)
        else:
            self._upload(caller, repo, valid, answers, base_url)
        return {"transfer": "basic", "objects": answers, "hash_algo": "sha256"}

    def _held(self, caller: Caller, oid: str, *, consistent: bool = True) -> FileRecord | None:
        """The content record of an oid the caller's tenant holds (live, with a reference above 0), else None."""
        stored, ref = self._repo.tenant_file(caller.tenant, oid, consistent=consistent)
        if stored is None or not holds(ref) or not stored.live:
            return None
        return stored

    def _download(self, caller: Caller, valid: list[tuple[int, LfsObject]], answers: list[dict[str, Any]]) -> None:
        """A pull reads what the tenant holds eventually consistent (half the units) and again consistently only
        when that says it does not hold it (an object verified a moment ago): an object held a moment ago and
        deleted since is still served — its bytes outlive the delete by DeleteGraceSeconds — as it would be to
        a pull a moment earlier (docs/design/cost.md, "Quota and GET /me")."""
        expires_in = self._s.download_url_expires
        for index, obj in valid:
            stored = self._held(caller, obj.oid, consistent=False) or self._held(caller, obj.oid)
            if stored is None:
                answers[index] = _failed(obj.oid, obj.size, 404, "Object does not exist")
                continue
            if stored.size != obj.size:
                answers[index] = _failed(obj.oid, obj.size, 422, f"the object {obj.oid} has {stored.size} bytes")
                continue
            url = self._objects.presign_get(
                stored.bucket or self._s.bucket,
                str(stored.s3_key),
                disposition=f'attachment; filename="{obj.oid}"',
                content_type=DEFAULT_CONTENT_TYPE,
                expires_in=expires_in,
            )
            answers[index]["actions"] = {"download": {"href": url, "expires_in": expires_in}}

    def _upload(
        self,
        caller: Caller,
        repo: str,
        valid: list[tuple[int, LfsObject]],
        answers: list[dict[str, Any]],
        base_url: str,
    ) -> None:
        limit = min(self._s.max_upload_bytes, S3_MAX_PUT)
        needed: list[tuple[int, LfsObject]] = []  # held objects keep their answer without actions: nothing written
        seen: dict[str, int] = {}  # oid -> the index answering it (an oid named twice is registered once)
        for index, obj in valid:
            stored = self._held(caller, obj.oid)
            if stored is not None and stored.size != obj.size:
                answers[index] = _failed(
                    obj.oid, obj.size, 422, f"size {obj.size} differs from the {stored.size} bytes of {obj.oid}"
                )
            elif stored is None and not 1 <= obj.size <= limit:
                answers[index] = _failed(
                    obj.oid, obj.size, 422, f"size must be from 1 to {limit} bytes (the basic transfer's largest)"
                )
            elif obj.oid in seen:  # named twice: one registration, the same answer (the same dict)
                first = answers[seen[obj.oid]]
                answers[index] = (
                    first
                    if first["size"] == obj.size
                    else _failed(obj.oid, obj.size, 422, f"{obj.oid} is named twice with different sizes")
                )
            else:
                seen[obj.oid] = index
                if stored is None:
                    needed.append((index, obj))
        self._check_quota(caller, [obj for _, obj in needed])
        registered: list[tuple[str, int]] = []
        for index, obj in needed:
            request = UploadRequest(f"{repo}@{obj.oid[:12]}", obj.size, DEFAULT_CONTENT_TYPE, obj.oid)
            try:
                answer = self._uploads.create_single(request, caller, via=UploadVia.LFS)
            except Forbidden as refused:  # the quota, reached meanwhile by a concurrent upload
                self._release(caller, registered)
                raise LfsError(507, refused.message) from None
            registered.append((answer.body["upload_id"], obj.size))
            answers[index]["actions"] = self._actions(answer.body, repo, base_url)

    def _actions(self, issued: Mapping[str, Any], repo: str, base_url: str) -> dict[str, Any]:
        expires_in = int(issued["expires_in"])
        return {
            "upload": {"href": issued["upload_url"], "header": dict(issued["headers"]), "expires_in": expires_in},
            "verify": {"href": f"{base_url}/lfs/{repo}/verify/{issued['upload_id']}", "expires_in": expires_in},
        }

    def _check_quota(self, caller: Caller, needed: list[LfsObject]) -> None:
        """507 before anything is registered when the objects to upload cannot fit the tenant's quota."""
        quota, pending_limit = self._s.tenant_quota_bytes, self._s.tenant_pending_limit
        if not needed or not (quota or pending_limit):
            return
        usage = self._repo.tenant_usage(caller.tenant)
        total = sum(obj.size for obj in needed)
        if quota and usage.used_bytes + total > quota:
            raise LfsError(
                507,
                f"the push needs {total} bytes more but the tenant's quota is {quota} bytes "
                f"({usage.used_bytes} used or pending): delete files or ask for a larger quota",
            )
        if pending_limit and usage.pending_count + len(needed) > pending_limit:
            raise LfsError(
                507,
                f"the push would leave {usage.pending_count + len(needed)} uploads pending, the tenant's limit is "
                f"{pending_limit}: push fewer objects at once (lfs.concurrenttransfers) or finish other uploads",
            )

    def _release(self, caller: Caller, registered: list[tuple[str, int]]) -> None:
        now = clock.now()
        for upload_id, size in registered:
            self._repo.cancel_upload(upload_id, UploadStatus.PENDING, now, tenant=caller.tenant, quota_bytes=size)

    # ------------------------------------------------------------------ verify
    def verify(self, caller: Caller, upload_id: str, body: Any) -> None:
        obj = parse_object(body)
        upload = self._repo.get_upload(upload_id)
        if (
            upload is None
            or upload.tenant != caller.tenant
            or (upload.sha256 or upload.hash) != obj.oid
            or upload.size != obj.size
        ):
            raise LfsError(404, f"no upload of {obj.oid} with {obj.size} bytes has this verify link")
        if upload.status == UploadStatus.PENDING:
            self._ingest(ObjectRef(upload.bucket or self._s.bucket, str(upload.s3_key)))
            after = self._repo.get_upload(upload_id)
            if after is None:
                raise LfsError(422, f"the upload of {obj.oid} is gone: push again")
            upload = after
            if upload.status == UploadStatus.PENDING:
                raise LfsError(422, f"the bytes of {obj.oid} are not in the store: upload them first")
        if not upload.status.processed:
            raise LfsError(422, f"the upload of {obj.oid} is {upload.status.value}: push again")
