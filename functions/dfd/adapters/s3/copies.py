"""The S3 adapter's server-side copy of one object version (the drop zone's move to an upload key)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, translate
from dfd.core.errors import ServiceUnavailable

GIB = 1024**3
# one CopyObject up to S3's largest (5 GiB): its ETag is the content's MD5, the same for every copy of the bytes;
# above, UploadPartCopy in parts of 512 MiB (at most 360 parts for MaxUploadBytes' 180 GiB), 8 at once
COPY_THRESHOLD = 5 * GIB
COPY_PART = 512 * 1024**2
COPY_CONCURRENCY = 8


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
    ) -> None:
        """Copy the version `etag` of `source_key` to `target_key` in the same bucket (CopySourceIfMatch: raises
        ObjectChanged when the source moved on, ObjectNotFound when it is gone), with `content_type` and
        `metadata` in place of the source's. s3transfer chooses CopyObject or UploadPartCopy by size."""
        extra: dict[str, Any] = {
            "CopySourceIfMatch": etag,
            "MetadataDirective": "REPLACE",
            "ContentType": content_type,
            "Metadata": metadata,
        }
        # imported here: only the drop zone copies, and s3transfer is not among the ingest's init imports
        from s3transfer.exceptions import TransferNotDoneError
        from s3transfer.manager import TransferConfig, TransferManager

        config = TransferConfig(
            multipart_threshold=COPY_THRESHOLD, multipart_chunksize=COPY_PART, max_request_concurrency=COPY_CONCURRENCY
        )
        manager = TransferManager(self._s3, config)
        try:
            with manager:
                future = manager.copy({"Bucket": bucket, "Key": source_key}, bucket, target_key, extra_args=extra)
                future.result()
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CopyObject", source_key) from error
        except TransferNotDoneError as error:
            raise ServiceUnavailable(f"S3 copy of {source_key} did not finish: {error}") from error
