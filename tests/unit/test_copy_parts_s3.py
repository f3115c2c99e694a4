"""The S3 adapter's calls of a copy across invocations (dfd.adapters.s3.copies), against botocore's Stubber: ListParts
is read page after page (10,000 parts are ten pages), S3's answers become the domain's errors (NoSuchUpload:
MultipartGone, 412: ObjectChanged, NoSuchKey: ObjectNotFound), an abort of an upload S3 knows no more is done."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import Stubber

from dfd.adapters.s3 import ObjectStore
from dfd.core.errors import MultipartGone, ObjectChanged, ObjectNotFound

BUCKET = "bucket"
TARGET = "uploads/0123"


@pytest.fixture
def stubbed() -> Iterator[tuple[ObjectStore, Stubber]]:
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield ObjectStore(client, client), stubber
        stubber.assert_no_pending_responses()


def _page(numbers: range, *, more: bool) -> dict[str, object]:
    page: dict[str, object] = {
        "Parts": [{"PartNumber": n, "ETag": f'"e{n}"', "Size": 5 * 1024 * 1024} for n in numbers],
        "IsTruncated": more,
    }
    if more:
        page["NextPartNumberMarker"] = numbers[-1]
    return page


def test_every_page_of_the_parts_is_read(stubbed: tuple[ObjectStore, Stubber]) -> None:
    store, stubber = stubbed
    base = {"Bucket": BUCKET, "Key": TARGET, "UploadId": "u1", "MaxParts": 1000}
    stubber.add_response("list_parts", _page(range(1, 1001), more=True), {**base, "PartNumberMarker": 0})
    stubber.add_response("list_parts", _page(range(1001, 1501), more=False), {**base, "PartNumberMarker": 1000})
    parts = store.copied_parts(BUCKET, TARGET, "u1")
    assert sorted(parts) == list(range(1, 1501)) and parts[1500] == ('"e1500"', 5 * 1024 * 1024)


def test_s3s_answers_are_the_domains_errors(stubbed: tuple[ObjectStore, Stubber]) -> None:
    store, stubber = stubbed
    stubber.add_client_error("list_parts", "NoSuchUpload", http_status_code=404)
    with pytest.raises(MultipartGone):
        store.copied_parts(BUCKET, TARGET, "u1")
    for code, status, error in (("PreconditionFailed", 412, ObjectChanged), ("NoSuchKey", 404, ObjectNotFound)):
        stubber.add_client_error("upload_part_copy", code, http_status_code=status)
        with pytest.raises(error):
            store.copy_part(BUCKET, "s3/t/o/a", '"etag"', TARGET, "u1", 1, 0, 99)
    stubber.add_client_error("complete_multipart_upload", "PreconditionFailed", http_status_code=412)
    with pytest.raises(ObjectChanged):  # IfNoneMatch "*": an object is at the target
        store.complete_copy(BUCKET, TARGET, "u1", {1: '"e1"'})
    stubber.add_client_error("abort_multipart_upload", "NoSuchUpload", http_status_code=404)
    store.abort_copy(BUCKET, TARGET, "u1")  # aborted before: done


def test_a_part_copy_names_its_range_and_the_version(stubbed: tuple[ObjectStore, Stubber]) -> None:
    store, stubber = stubbed
    stubber.add_response(
        "upload_part_copy",
        {"CopyPartResult": {"ETag": '"p7"'}},
        {
            "Bucket": BUCKET,
            "Key": TARGET,
            "UploadId": "u1",
            "PartNumber": 7,
            "CopySource": {"Bucket": BUCKET, "Key": "s3/t/o/a"},
            "CopySourceIfMatch": '"etag"',
            "CopySourceRange": "bytes=600-699",
        },
    )
    assert store.copy_part(BUCKET, "s3/t/o/a", '"etag"', TARGET, "u1", 7, 600, 699) == '"p7"'
    stubber.add_response(
        "complete_multipart_upload",
        {},
        {
            "Bucket": BUCKET,
            "Key": TARGET,
            "UploadId": "u1",
            "MultipartUpload": {"Parts": [{"PartNumber": 1, "ETag": '"e1"'}, {"PartNumber": 2, "ETag": '"e2"'}]},
            "IfNoneMatch": "*",
        },
    )
    store.complete_copy(BUCKET, TARGET, "u1", {2: '"e2"', 1: '"e1"'})  # in part order
