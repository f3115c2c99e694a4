"""The S3 adapter's server-side copy of one object version to a key that holds none (the drop zone's move to an
upload key). Hand-written rather than s3transfer's copy: the bucket policy refuses any write under the upload
prefix without If-None-Match, which s3transfer cannot send (neither on CopyObject nor on the multipart completion)."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, translate
from dfd.core.errors import DfdError

GIB = 1024**3
COPY_MAX = 5 * GIB  # S3's largest CopyObject: above it, UploadPartCopy
COPY_PART = 512 * 1024**2  # at most 360 parts for MaxUploadBytes' 180 GiB (S3 allows 10,000)
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
        """CreateMultipartUpload, UploadPartCopy of each COPY_PART range (CopySourceIfMatch), then
        CompleteMultipartUpload IfNoneMatch "*"; aborted when any step fails."""
        created = self._s3.create_multipart_upload(
            Bucket=bucket, Key=target_key, ContentType=content_type, Metadata=metadata
        )
        upload_id = str(created["UploadId"])
        ranges = [(n + 1, start, min(start + COPY_PART, size) - 1) for n, start in enumerate(range(0, size, COPY_PART))]

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
