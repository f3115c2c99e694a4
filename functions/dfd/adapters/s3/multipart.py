"""The S3 adapter's multipart uploads (dfd.uploads.multipart): create, list parts, complete, abort."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from dfd.adapters.s3.base import Store, translate
from dfd.core.errors import MultipartGone, StillCompleting
from dfd.core.objects import PartInfo


class Multipart(Store):
    def create_multipart(
        self, bucket: str, key: str, *, content_type: str, checksum: bool, metadata: dict[str, str] | None = None
    ) -> str:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "ContentType": content_type}
        if metadata:
            kwargs["Metadata"] = metadata  # the completed object carries it (the ingest's tenant hint)
        if checksum:
            kwargs["ChecksumAlgorithm"] = "SHA256"
        try:
            upload_id: str = self._s3.create_multipart_upload(**kwargs)["UploadId"]
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CreateMultipartUpload", key) from error
        return upload_id

    def list_parts(self, bucket: str, key: str, s3_upload_id: str) -> list[PartInfo]:
        """Every part, over all ListParts pages (1,000 per page), sorted by part number."""
        parts: dict[int, PartInfo] = {}
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "UploadId": s3_upload_id}
        while True:
            try:
                page = self._s3.list_parts(**kwargs)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "ListParts", key) from error
            for part in page.get("Parts", []):
                number = int(part["PartNumber"])
                parts[number] = PartInfo(number, part["ETag"], int(part["Size"]), part.get("ChecksumSHA256"))
            marker = page.get("NextPartNumberMarker")
            if not page.get("IsTruncated") or marker is None:
                return [parts[number] for number in sorted(parts)]
            kwargs["PartNumberMarker"] = int(marker)

    def complete_multipart(self, bucket: str, key: str, s3_upload_id: str, parts: list[PartInfo], *, size: int) -> None:
        """CompleteMultipartUpload IfNoneMatch "*" (an object at the key → ObjectChanged), with each part's
        checksum when S3 keeps one (an upload created with SHA-256 requires them). Sent on the complete client,
        whose read timeout is the request's budget: S3 may take minutes to assemble 10,000 parts, and a wait
        past the budget is StillCompleting (the client repeats the complete)."""
        listed: list[dict[str, Any]] = []
        for part in parts:
            entry: dict[str, Any] = {"PartNumber": part.part_number, "ETag": part.etag}
            if part.checksum_sha256:
                entry["ChecksumSHA256"] = part.checksum_sha256
            listed.append(entry)
        try:
            self._complete.complete_multipart_upload(
                Bucket=bucket,
                Key=key,
                UploadId=s3_upload_id,
                MultipartUpload={"Parts": listed},
                IfNoneMatch="*",
                MpuObjectSize=size,  # S3 refuses an assembly of any other size
            )
        except ReadTimeoutError as error:
            raise StillCompleting(f"S3 is still assembling {key}") from error
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CompleteMultipartUpload", key) from error

    def abort_multipart(self, bucket: str, key: str, s3_upload_id: str) -> None:
        try:
            self._s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=s3_upload_id)
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "AbortMultipartUpload", key)
            if not isinstance(mapped, MultipartGone):
                raise mapped from error
