"""The S3 adapter's server-side copy of one object version to a key that holds none (the drop zone's move to an
upload key). Hand-written rather than s3transfer's copy: the bucket policy refuses any write under the upload
prefix without If-None-Match, which s3transfer cannot send (neither on CopyObject nor on the multipart completion).

Two ways: :meth:`Copies.copy`, the whole copy within one call (the ingest's inline copy), and the steps of a copy
run across invocations (dfd.ingest.dropcopy): :meth:`Copies.create_copy`, :meth:`Copies.copied_parts`,
:meth:`Copies.copy_part`, :meth:`Copies.complete_copy`, :meth:`Copies.abort_copy`. Both cut the object into
:func:`dfd.core.copyparts.copy_part_bytes` ranges."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, translate
from dfd.core import copyparts
from dfd.core.copyparts import copy_part_bytes, copy_ranges
from dfd.core.errors import DfdError, MultipartGone

GIB = 1024**3
COPY_MAX = 5 * GIB  # S3's largest CopyObject: above it, UploadPartCopy
COPY_PART = copyparts.COPY_PART  # the smallest part of the inline copy (tests lower it)
COPY_WORKERS = 8  # UploadPartCopy calls in flight at once


class Copies(Store):
    def copy(
        self,
        bucket: str,
        source_key: str,
        etag: str,
        target_key: str,
        *,
        content_type: str,
        metadata: dict[str, str],
        size: int | None = None,
    ) -> None:
        """Copy the version `etag` of `source_key` to `target_key` in the same bucket, with `content_type` and
        `metadata` in place of the source's, IfNoneMatch "*". Raises ObjectChanged when a precondition failed (the
        source moved on, or an object is at the target already: the caller tells which), ObjectNotFound when the
        source is gone, ObjectArchived when its storage class keeps it from being copied (an archive)."""
        source = {"Bucket": bucket, "Key": source_key}
        try:
            if size is None or size <= COPY_MAX:
                self._s3.copy_object(
                    Bucket=bucket,
                    Key=target_key,
                    CopySource=source,
                    CopySourceIfMatch=etag,
                    IfNoneMatch="*",
                    MetadataDirective="REPLACE",
                    ContentType=content_type,
                    Metadata=metadata,
                )
                return
            self._copy_parts(bucket, source, etag, target_key, size, content_type, metadata)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CopyObject", source_key) from error

    def _copy_parts(
        self,
        bucket: str,
        source: dict[str, str],
        etag: str,
        target_key: str,
        size: int,
        content_type: str,
        metadata: dict[str, str],
    ) -> None:
        """CreateMultipartUpload, UploadPartCopy of each copy_part_bytes range (CopySourceIfMatch), then
        CompleteMultipartUpload IfNoneMatch "*"; aborted when any step fails."""
        created = self._s3.create_multipart_upload(
            Bucket=bucket, Key=target_key, ContentType=content_type, Metadata=metadata
        )
        upload_id = str(created["UploadId"])
        ranges = copy_ranges(size, copy_part_bytes(size, COPY_PART))

        def part(spec: tuple[int, int, int]) -> dict[str, Any]:
            number, first, last = spec
            answer = self._s3.upload_part_copy(
                Bucket=bucket,
                Key=target_key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource=source,
                CopySourceIfMatch=etag,
                CopySourceRange=f"bytes={first}-{last}",
            )
            return {"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]}

        try:
            with ThreadPoolExecutor(max_workers=COPY_WORKERS, thread_name_prefix="dfd-copy") as pool:
                parts = list(pool.map(part, ranges))
            self._complete.complete_multipart_upload(
                Bucket=bucket, Key=target_key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
            )
        except (ClientError, BotoCoreError, DfdError):
            # what the abort leaves, the bucket's lifecycle rule aborts (AbortIncompleteMultipartUploads)
            with contextlib.suppress(ClientError, BotoCoreError):
                self._s3.abort_multipart_upload(Bucket=bucket, Key=target_key, UploadId=upload_id)
            raise

    # ------------------------------------------------------------------ a copy across invocations
    def create_copy(self, bucket: str, target_key: str, *, content_type: str, metadata: dict[str, str]) -> str:
        """CreateMultipartUpload at `target_key` with `content_type` and `metadata`: its UploadId."""
        try:
            created = self._s3.create_multipart_upload(
                Bucket=bucket, Key=target_key, ContentType=content_type, Metadata=metadata
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CreateMultipartUpload", target_key) from error
        return str(created["UploadId"])

    def copied_parts(self, bucket: str, target_key: str, upload_id: str) -> dict[int, tuple[str, int]]:
        """The parts the multipart upload holds (ListParts, every page): number -> (ETag, size). Raises
        MultipartGone when S3 knows no such upload (completed, aborted, or aborted by the lifecycle rule)."""
        parts: dict[int, tuple[str, int]] = {}
        marker = 0
        try:
            while True:
                page = self._s3.list_parts(
                    Bucket=bucket, Key=target_key, UploadId=upload_id, MaxParts=1000, PartNumberMarker=marker
                )
                for part in page.get("Parts", []):
                    parts[int(part["PartNumber"])] = (str(part["ETag"]), int(part["Size"]))
                if not page.get("IsTruncated"):
                    return parts
                marker = int(page["NextPartNumberMarker"])
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "ListParts", target_key) from error

    def copy_part(
        self,
        bucket: str,
        source_key: str,
        etag: str,
        target_key: str,
        upload_id: str,
        number: int,
        first: int,
        last: int,
    ) -> str:
        """UploadPartCopy of bytes `first`..`last` of the version `etag` of `source_key` as part `number`: its
        ETag. ObjectChanged: the source moved on (412); ObjectNotFound: it is gone; MultipartGone: the upload."""
        try:
            answer = self._s3.upload_part_copy(
                Bucket=bucket,
                Key=target_key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource={"Bucket": bucket, "Key": source_key},
                CopySourceIfMatch=etag,
                CopySourceRange=f"bytes={first}-{last}",
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "UploadPartCopy", source_key) from error
        return str(answer["CopyPartResult"]["ETag"])

    def complete_copy(self, bucket: str, target_key: str, upload_id: str, parts: dict[int, str]) -> None:
        """CompleteMultipartUpload of `parts` (number -> ETag) IfNoneMatch "*". ObjectChanged: an object is at the
        target already; MultipartGone: S3 knows no such upload (completed before, or aborted)."""
        listed = [{"PartNumber": number, "ETag": parts[number]} for number in sorted(parts)]
        try:
            self._complete.complete_multipart_upload(
                Bucket=bucket, Key=target_key, UploadId=upload_id, MultipartUpload={"Parts": listed}, IfNoneMatch="*"
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CompleteMultipartUpload", target_key) from error

    def abort_copy(self, bucket: str, target_key: str, upload_id: str) -> None:
        """AbortMultipartUpload; one S3 knows no more is aborted already."""
        try:
            self._s3.abort_multipart_upload(Bucket=bucket, Key=target_key, UploadId=upload_id)
        except (ClientError, BotoCoreError) as error:
            translated = translate(error, "AbortMultipartUpload", target_key)
            if not isinstance(translated, MultipartGone):
                raise translated from error
