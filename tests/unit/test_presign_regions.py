"""Every presigned URL (PUT, UploadPart, GET) names the Region's own virtual-hosted endpoint, in every Region
(Regions launched after March 2019 refuse the global endpoint for good); the local stack's configured endpoint
keeps working."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from dfd.adapters import aws
from dfd.adapters.s3 import ObjectStore

BUCKET = "dfd-files-123456789012"
# us-east-1 (the global endpoint's own Region), older Regions, and ap-southeast-3 (2021), il-central-1 (2023)
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-3", "il-central-1"]


@pytest.fixture
def fresh_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    aws.s3.cache_clear()
    yield monkeypatch
    aws.s3.cache_clear()


def _urls(store: ObjectStore) -> dict[str, str]:
    put, _ = store.presign_put(
        BUCKET, "uploads/a/b", size=10, content_type="text/plain", checksum_b64=None, expires_in=60
    )
    part, _ = store.presign_upload_part(
        BUCKET, "uploads/a/b", "upload-id", 3, size=5 * 1024 * 1024, checksum_b64=None, expires_in=60
    )
    get = store.presign_get(BUCKET, "uploads/a/b", disposition='attachment; filename="b"', expires_in=60)
    return {"put": put, "part": part, "get": get}


@pytest.mark.parametrize("region", REGIONS)
def test_presigned_urls_name_the_regional_virtual_hosted_endpoint(fresh_s3: pytest.MonkeyPatch, region: str) -> None:
    fresh_s3.setenv("AWS_REGION", region)
    fresh_s3.setenv("AWS_DEFAULT_REGION", region)
    for kind, url in _urls(ObjectStore(aws.s3())).items():
        parts = urlsplit(url)
        assert (parts.scheme, parts.hostname) == ("https", f"{BUCKET}.s3.{region}.amazonaws.com"), (kind, url)
        assert parts.path == "/uploads/a/b", (kind, url)
        # signed for that Region
        assert f"%2F{region}%2Fs3%2Faws4_request" in parts.query, (kind, url)


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_a_configured_endpoint_keeps_path_style(fresh_s3: pytest.MonkeyPatch, variable: str) -> None:
    # the local stack: moto on localhost, where <bucket>.localhost would not resolve
    fresh_s3.setenv(variable, "http://localhost:4566")
    for kind, url in _urls(ObjectStore(aws.s3())).items():
        parts = urlsplit(url)
        assert (parts.hostname, parts.port, parts.path) == ("localhost", 4566, f"/{BUCKET}/uploads/a/b"), (kind, url)
