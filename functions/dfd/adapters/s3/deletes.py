"""The S3 adapter's checks and deletes of one object version (IfMatch its ETag), the bucket's listing, and the
whole body of a small object (the inventory reports the reconcile reads)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, translate
from dfd.core.errors import ObjectChanged, ObjectNotFound
from dfd.core.objects import ListedObject


def _version(bucket: str, key: str, etag: str | None) -> dict[str, Any]:
    """The parameters naming one version of an object: IfMatch its ETag, when known."""
    return {"Bucket": bucket, "Key": key} | ({"IfMatch": etag} if etag else {})


class Deletes(Store):
    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        """Delete one object version (IfMatch its ETag): True when deleted or already gone."""
        try:
            self._s3.delete_object(**_version(bucket, key, etag))
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
        try:
            self._s3.head_object(**_version(bucket, key, etag))
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "HeadObject", key)
            if isinstance(mapped, ObjectNotFound | ObjectChanged):
                return False
            raise mapped from error
        return True

    def list_objects(
        self, bucket: str, prefix: str, limit: int, token: str | None
    ) -> tuple[list[ListedObject], str | None]:
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": limit}
        if token:
            params["ContinuationToken"] = token
        try:
            page = self._s3.list_objects_v2(**params)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "ListObjectsV2", prefix) from error
        listed = [ListedObject(str(o["Key"]), str(o["ETag"])) for o in page.get("Contents", [])]
        following = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        return listed, (str(following) if following else None)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
            with response["Body"] as body:
                return bytes(body.read())
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", key) from error
