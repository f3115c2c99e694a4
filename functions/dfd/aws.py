"""boto3 clients, created once per process and only when first used (cold start stays lean)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from botocore.config import _RetryDict

_RETRIES: _RetryDict = {"max_attempts": 6, "mode": "adaptive"}


@cache
def dynamodb() -> Any:
    return boto3.client("dynamodb", config=Config(retries=_RETRIES, max_pool_connections=32))


@cache
def s3() -> Any:
    """For presigning and small calls: SigV4 so the signed headers are enforced."""
    return boto3.client("s3", config=Config(signature_version="s3v4", retries=_RETRIES))


@cache
def s3_ingest() -> Any:
    """For streaming objects: the ingest hashes every byte itself, so boto3's own response checksum
    validation (a second full pass) is off; a wide pool serves parallel ranged reads."""
    return boto3.client(
        "s3",
        config=Config(
            signature_version="s3v4",
            retries=_RETRIES,
            response_checksum_validation="when_required",
            max_pool_connections=64,
            tcp_keepalive=True,
        ),
    )
