"""Git LFS Batch API (git-lfs docs/api/batch.md): `basic` and `dfd-multipart` transfers, sha256, on dfd's own uploads.

``POST /lfs/<repo>/objects/batch``. Objects belong to the caller's TENANT, shared by all its repositories:

* upload — an oid the tenant holds with that size: the object without ``actions`` (nothing to send), and nothing
  written: no upload record, no duplicate avoided counted, no reference taken (a push that sends nothing is no
  upload: re-pushing a branch leaves My uploads, the counters and the quota as they were). Anything else —
  content only other tenants hold included, answered exactly like unknown content — is an ordinary dfd upload
  registered by UploadService (same record, quota, ingest, dedup, reaper): ``actions.upload`` is its presigned
  PUT, whose ``header`` carries every signed header (Content-Type above all: git-lfs would sniff one) and
  ``actions.verify`` points at ``/lfs/<repo>/verify/<upload id>``.
* verify — 200 once the upload is processed: if the S3 event has not been ingested yet, the verify runs the
  same idempotent ingest on the object itself, so the oid is the tenant's from the 200 on. A multipart upload
  is left to its event's ingest (it is hashed whole): completed and not yet recorded, its verify is a 429 with
  Retry-After, which the agent repeats; a registration a resumed upload replaced verifies once the tenant holds
  the object.
* download — a presigned GET for every oid the tenant holds; any other → per-object 404, the same answer
  whether or not another tenant holds it. Downloads are always `basic`: one GET carries any size S3 holds.

Transfers (``transfers`` in the request; absent = ``basic``). An upload batch is answered ``dfd-multipart`` when
the client offers it and at least one object to send is multipart: above the single-PUT limit
(``LFS_BASIC_MAX_BYTES``, template LfsBasicMaxBytes; at most S3's 5 GiB) or at least the deployment's multipart
threshold. Such an object is registered by MultipartService (the same registration as ``POST /upload``'s
multipart uploads) and its ``upload`` action names the /lfs API (``href``: ``<base>/lfs/<repo>``) with the plan
in ``header`` (``Upload-Id``, ``Part-Size``, ``Part-Count``, and the batch's own ``Authorization`` for the
agent's calls back to this API): the agent presigns, lists and completes parts at ``/lfs/<repo>/uploads/<id>``.
The batch's other objects keep basic's presigned PUT (the agent PUTs it as git-lfs would). Every other batch is
``basic``, answered exactly as for a client that offers nothing else.

Per-object 422: malformed oid, size not a positive integer, a size other than the one the tenant holds, above
the single-PUT limit when the client did not offer ``dfd-multipart`` (the message names the limit and the agent),
or above the deployment's MaxUploadBytes. Response-level: 413 over MAX_OBJECTS objects, 422 for a malformed
request or one offering no transfer this server speaks, 409 for a hash_algo other than sha256, 507 when the
objects to upload exceed the tenant's quota (nothing registered).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.config import S3_MAX_PUT, S3_MIN_PART, ConfigError, Settings
from dfd.core.conflicts import QuotaRefused
from dfd.core.errors import Forbidden
from dfd.core.notifications import ObjectRef
from dfd.core.records import FileRecord, UploadStatus, UploadVia, holds
from dfd.lfs.request import OID, LfsError, body_object
from dfd.uploads.service import DEFAULT_CONTENT_TYPE, UploadRequest, UploadService, quota_exceeded

if TYPE_CHECKING:
    from dfd.core.objects import ObjectStore
    from dfd.identity.caller import Caller
    from dfd.lfs.ports import LfsStore
    from dfd.uploads.multipart import MultipartService

MAX_OBJECTS = 100  # objects per batch request (git-lfs sends 100 at most: lfs.tq batch size)
MEDIA_TYPE = "application/vnd.git-lfs+json"
BASIC = "basic"
MULTIPART = "dfd-multipart"  # the custom transfer of dfd's agent (scripts/lfs-agent)
TRANSFERS = (BASIC, MULTIPART)
INGEST_RETRY_AFTER = 5  # seconds: a verify of a completed multipart upload its ingest has not recorded yet
AGENT_HINT = "scripts/lfs-agent install sets up dfd's multipart transfer agent (docs: Uploading with Git LFS)"


@dataclass(frozen=True, slots=True)
class LfsObject:
    oid: str
    size: int


@dataclass(frozen=True, slots=True)
class _Plan:
    """What an upload batch's actions are made of."""

    repo: str
    base_url: str
    authorization: str | None
    offers_multipart: bool


def basic_max_bytes() -> int:
    """The single-PUT limit of the deployment (LFS_BASIC_MAX_BYTES, 5 MiB to 5 GiB; S3's 5 GiB when unset):
    every larger object can be sent in parts (S3's smallest part is 5 MiB)."""
    raw = os.environ.get("LFS_BASIC_MAX_BYTES", "").strip()
    value = int(raw) if raw.isascii() and raw.isdigit() else None if raw else S3_MAX_PUT
    if value is None or not S3_MIN_PART <= value <= S3_MAX_PUT:
        raise ConfigError(
            f"LFS_BASIC_MAX_BYTES must be an integer from {S3_MIN_PART} to {S3_MAX_PUT}, not {raw[:32]!r}"
        )
    return value


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


def _check_options(body: Mapping[str, Any]) -> frozenset[str]:
    """The batch request's optional fields: absent, or of the spec's type (null is malformed, as for git-lfs,
    which omits what it does not send); 422 for a malformed one or transfers naming none this server speaks,
    409 for a hash algorithm other than sha256. The transfers of this server the client offers."""
    offered = [BASIC]
    if "transfers" in body:
        transfers = body["transfers"]
        if not isinstance(transfers, list) or not all(isinstance(name, str) for name in transfers):
            raise LfsError(422, "transfers must be a list of transfer adapter names")
        if not any(name in TRANSFERS for name in transfers):
            raise LfsError(422, f"this server speaks the {BASIC} and {MULTIPART} transfers ({AGENT_HINT})")
        offered = transfers
    hash_algo = body.get("hash_algo", "sha256")
    if not isinstance(hash_algo, str):
        raise LfsError(422, "hash_algo must be a string")
    if hash_algo != "sha256":
        raise LfsError(409, f"this server supports only the sha256 hash algorithm, not {hash_algo[:32]!r}")
    return frozenset(offered) & frozenset(TRANSFERS)


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
        basic_max_bytes: int = S3_MAX_PUT,
        multipart: MultipartService | None = None,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._uploads = uploads
        self._ingest = ingest
        self._max_objects = max_objects
        self._basic_max = min(basic_max_bytes, S3_MAX_PUT)  # the single-PUT limit: S3's largest PUT at most
        # the multipart uploads' service (deps: the one of /uploads/{id}/..., with its CompleteMultipartUpload client)
        self._multipart = multipart or uploads.multipart

    # ------------------------------------------------------------------ batch
    @property
    def multipart(self) -> MultipartService:
        """The multipart uploads a dfd-multipart upload action names (/lfs/<repo>/uploads/<id>)."""
        return self._multipart

    def batch(
        self, caller: Caller, repo: str, raw_body: Any, base_url: str, authorization: str | None = None
    ) -> dict[str, Any]:
        """The batch answer; ``authorization``: the request's Authorization header, handed to the agent in a
        dfd-multipart action for its calls back to this API (never to S3: part PUTs carry presigned headers)."""
        body = body_object(raw_body)
        operation = body.get("operation")
        if operation not in ("upload", "download"):
            raise LfsError(422, 'operation must be "upload" or "download"')
        offered = _check_options(body)
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
        transfer = BASIC
        if operation == "download":
            self._download(caller, valid, answers)
        else:
            plan = _Plan(repo, base_url, authorization, MULTIPART in offered)
            transfer = self._upload(caller, plan, valid, answers)
            # a client offering only dfd-multipart gets it even without parts (the agent also PUTs basic's)
            transfer = MULTIPART if BASIC not in offered else transfer
        return {"transfer": transfer, "objects": answers, "hash_algo": "sha256"}

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
        self, caller: Caller, plan: _Plan, valid: list[tuple[int, LfsObject]], answers: list[dict[str, Any]]
    ) -> str:
        """Registers what the batch asks git to send; the transfer the answer names."""
        needed: list[tuple[int, LfsObject]] = []  # held objects keep their answer without actions: nothing written
        seen: dict[str, int] = {}  # oid -> the index answering it (an oid named twice is registered once)
        for index, obj in valid:
            stored = self._held(caller, obj.oid)
            problem = None if stored is not None else self._size_problem(obj.size, plan.offers_multipart)
            if stored is not None and stored.size != obj.size:
                answers[index] = _failed(
                    obj.oid, obj.size, 422, f"size {obj.size} differs from the {stored.size} bytes of {obj.oid}"
                )
            elif problem:
                answers[index] = _failed(obj.oid, obj.size, 422, problem)
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
        in_parts = plan.offers_multipart and any(self._in_parts(obj.size) for _, obj in needed)
        registered: list[tuple[str, int]] = []
        for index, obj in needed:
            try:
                if in_parts and self._in_parts(obj.size):
                    issued = self._register_multipart(caller, plan.repo, obj)
                    actions = self._multipart_actions(issued, plan)
                else:
                    request = UploadRequest(f"{plan.repo}@{obj.oid[:12]}", obj.size, DEFAULT_CONTENT_TYPE, obj.oid)
                    issued = self._uploads.create_single(request, caller, via=UploadVia.LFS).body
                    actions = self._actions(issued, plan.repo, plan.base_url)
            except Forbidden as refused:  # the quota, reached meanwhile by a concurrent upload
                self._release(caller, registered)
                raise LfsError(507, refused.message) from None
            registered.append((issued["upload_id"], obj.size))
            answers[index]["actions"] = actions
        return MULTIPART if in_parts else BASIC

    def _size_problem(self, size: int, offers_multipart: bool) -> str | None:
        """Why an object to send cannot be: none, or the limit it is past (the transfers' and the deployment's)."""
        largest = self._s.max_upload_bytes if offers_multipart else min(self._basic_max, self._s.max_upload_bytes)
        if 1 <= size <= largest:
            return None
        if offers_multipart or size < 1 or largest == self._s.max_upload_bytes:
            return f"size must be from 1 to {largest} bytes (the deployment's largest upload)"
        return (
            f"size must be from 1 to {largest} bytes (the basic transfer's largest: one PUT); larger objects are "
            f"sent in parts by the {MULTIPART} transfer: {AGENT_HINT}"
        )

    def _in_parts(self, size: int) -> bool:
        """Whether an object of `size` bytes is sent in parts when the client offers dfd-multipart."""
        return size >= S3_MIN_PART and (size > self._basic_max or self.multipart.wanted(size, False))

    def _register_multipart(self, caller: Caller, repo: str, obj: LfsObject) -> Mapping[str, Any]:
        try:  # the registration of POST /upload's multipart uploads: the same record and quota write
            return self.multipart.create(
                caller,
                filename=f"{repo}@{obj.oid[:12]}",
                size=obj.size,
                content_type=DEFAULT_CONTENT_TYPE,
                sha256=obj.oid,
            )
        except QuotaRefused as refused:
            raise quota_exceeded(self._s, refused) from None

    def _multipart_actions(self, issued: Mapping[str, Any], plan: _Plan) -> dict[str, Any]:
        expires_in = int(issued["expires_in"])
        header = {
            "Upload-Id": str(issued["upload_id"]),
            "Part-Size": str(issued["part_size"]),
            "Part-Count": str(issued["part_count"]),
        }
        if plan.authorization:
            header["Authorization"] = plan.authorization
        return {
            "upload": {"href": f"{plan.base_url}/lfs/{plan.repo}", "header": header, "expires_in": expires_in},
            "verify": {
                "href": f"{plan.base_url}/lfs/{plan.repo}/verify/{issued['upload_id']}",
                "expires_in": expires_in,
            },
        }

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
        if upload.status == UploadStatus.PENDING and upload.multipart:
            # never hashed here (the ingest reads a multipart object whole, past this function's time): its S3
            # event's ingest records it, and the agent repeats this verify until then
            if upload.completed_at and not self._holds(caller, obj):
                raise LfsError(
                    429,
                    f"the {upload.size} bytes of {obj.oid} are being ingested: retry shortly",
                    {"Retry-After": str(INGEST_RETRY_AFTER)},
                )
        elif upload.status == UploadStatus.PENDING:
            self._ingest(ObjectRef(upload.bucket or self._s.bucket, str(upload.s3_key)))
            after = self._repo.get_upload(upload_id)
            if after is None:
                raise LfsError(422, f"the upload of {obj.oid} is gone: push again")
            upload = after
        if upload.status.processed and upload.hash not in (None, obj.oid):  # parts carry the client's checksums
            raise LfsError(422, f"the bytes sent for {obj.oid} have another SHA-256: push again")
        if upload.status.processed or self._holds(caller, obj):
            return
        if upload.status == UploadStatus.PENDING:
            raise LfsError(422, f"the bytes of {obj.oid} are not in the store: upload them first")
        raise LfsError(422, f"the upload of {obj.oid} is {upload.status.value}: push again")

    def _holds(self, caller: Caller, obj: LfsObject) -> bool:
        """The tenant holds the object through another upload: the one a resumed multipart transfer completed
        in place of this batch's (scripts/lfs-agent), or a concurrent push's."""
        stored = self._held(caller, obj.oid)
        return stored is not None and stored.size == obj.size
