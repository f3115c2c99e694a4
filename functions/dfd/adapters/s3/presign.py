"""The S3 adapter's presigned URLs: object PUT and GET, multipart UploadPart."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, translate


class Presigns(Store):
    def presign_put(
        self,
        bucket: str,
        key: str,
        *,
        size: int,
        content_type: str,
        checksum_b64: str | None,
        expires_in: int,
        metadata: dict[str, str] | None = None,
    ) -> tuple[str, dict[str, str]]:
        """A SigV4 PUT URL signing Content-Length, Content-Type, If-None-Match: * (and the SHA-256, and each
        `metadata` entry as its x-amz-meta-* header)."""
        params: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "ContentType": content_type,
            "ContentLength": size,
            "IfNoneMatch": "*",
        }
        headers = {"content-type": content_type, "content-length": str(size), "if-none-match": "*"}
        if checksum_b64:
            params["ChecksumSHA256"] = checksum_b64
            headers["x-amz-checksum-sha256"] = checksum_b64
        if metadata:
            params["Metadata"] = dict(metadata)
            headers.update({f"x-amz-meta-{name}": value for name, value in metadata.items()})
        try:
            url: str = self._presign.generate_presigned_url("put_object", Params=params, ExpiresIn=expires_in)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign PUT", key) from error
        return url, headers

    def presign_get(
        self, bucket: str, key: str, *, disposition: str, content_type: str | None = None, expires_in: int
    ) -> str:
        """A GET URL answering with this Content-Disposition and, when given, this Content-Type (the reader's
        own view of a shared object, never the first uploader's type)."""
        params: dict[str, Any] = {"Bucket": bucket, "Key": key, "ResponseContentDisposition": disposition}
        if content_type:
            params["ResponseContentType"] = content_type
        try:
            url: str = self._presign.generate_presigned_url(
                "get_object",
                Params=params,
                ExpiresIn=expires_in,
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign GET", key) from error
        return url

    def presign_upload_part(
        self,
        bucket: str,
        key: str,
        s3_upload_id: str,
        part_number: int,
        *,
        size: int,
        checksum_b64: str | None,
        expires_in: int,
    ) -> tuple[str, dict[str, str]]:
        """A SigV4 UploadPart URL signing the part's exact Content-Length (and its SHA-256)."""
        params: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "UploadId": s3_upload_id,
            "PartNumber": part_number,
            "ContentLength": size,
        }
        headers = {"content-length": str(size)}
        if checksum_b64:
            params["ChecksumSHA256"] = checksum_b64
            headers["x-amz-checksum-sha256"] = checksum_b64
        try:
            url: str = self._presign.generate_presigned_url("upload_part", Params=params, ExpiresIn=expires_in)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign UploadPart", key) from error
        return url, headers
