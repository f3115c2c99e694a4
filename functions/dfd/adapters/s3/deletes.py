"""The S3 adapter's checks and deletes of one object version (IfMatch its ETag)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, translate
from dfd.errors import ObjectChanged, ObjectNotFound


class Deletes(Store):
    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        """Delete one object version (IfMatch its ETag): True when deleted or already gone."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if etag:
            kwargs["IfMatch"] = etag
        try:
            self._s3.delete_object(**kwargs)
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "DeleteObject", key)
            if isinstance(mapped, ObjectNotFound):
                return True
            if isinstance(mapped, ObjectChanged):
                return False  # a newer version took the key: it has its own event
            raise mapped from error
        return True

    def exists(self, bucket: str, key: str, etag: str | None) -> bool:
        """HeadObject IfMatch `etag`: True when that version is there; False when missing or overwritten."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if etag:
            kwargs["IfMatch"] = etag
        try:
            self._s3.head_object(**kwargs)
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "HeadObject", key)
            if isinstance(mapped, ObjectNotFound | ObjectChanged):
                return False
            raise mapped from error
        return True
