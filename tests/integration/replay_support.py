"""An upload made and ingested for integration tests."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Aws
from tests.integration.flow_support import post_upload, put


def uploaded(aws: Aws, data: bytes, name: str = "f.bin") -> dict[str, Any]:
    status, answer = post_upload({"filename": name, "size": len(data)})
    assert status == 201
    assert put(answer, data).status_code == 200
    aws.drain()  # the S3 notification: these tests deliver events themselves
    return answer
