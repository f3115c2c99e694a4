"""AWS clients, created once per process and only when used (cold start stays lean).

Each factory is cached; the client behind it is built on its first attribute access, or at init by
`dfd.handlers.init_done` for the clients a function's first request needs, so a function that never calls S3
(metadata, stats, hashes, and the ingest's presigner) never pays for building an S3 client (its cost to a cold
start: docs/performance.md, target 7). `deps.reset()` clears the factories.

Every client retries in botocore's standard mode within the attempts and timeouts of dfd.core.retry (the one retry
policy: docs/retries.md).

The clients are botocore's, made by one botocore session: boto3 would make the same clients, but the functions
never import it (nor s3transfer, which it imports: docs/performance.md, target 7) and use nothing of it beyond
the clients.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import botocore.session
from botocore.config import Config

from dfd.core.retry import API_CALLS, COMPLETE_CALL, COPY_CALLS, OBJECT_READS
from dfd.core.retry import COMPLETE_WAIT_SECONDS as COMPLETE_WAIT_SECONDS

if TYPE_CHECKING:
    from botocore.config import _S3Dict


@cache
def session() -> botocore.session.Session:
    """The botocore session every client is made from (credentials and Region from the environment, as boto3's
    default session would find them)."""
    return botocore.session.get_session()


# a botocore session is not thread-safe while it creates a client (the ingest's worker threads may build a lazy
# client together)
_creating = threading.Lock()


def client(service: str, config: Config) -> Any:
    with _creating:
        return session().create_client(service, config=config)


class LazyClient:
    """A client built on first use (thread-safe); every attribute is the real client's."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build: Callable[[], Any] | None = build
        self._client: Any = None
        self._lock = threading.Lock()

    def build(self) -> Any:
        """The real client, built now if it was not yet (a function's init builds what its first request needs)."""
        return self._real()

    def _real(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    assert self._build is not None
                    self._client, self._build = self._build(), None
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)


def _dynamodb() -> Any:
    # 32 connections: more than the ingest's concurrent records (dfd.handlers.ingest.RECORD_WORKERS = 10), each
    # of which has at most one DynamoDB call in flight
    return client("dynamodb", config=Config(**API_CALLS.config(), max_pool_connections=32))


def _cognito() -> Any:
    return client("cognito-idp", config=Config(**API_CALLS.config()))


def s3_addressing() -> _S3Dict:
    """S3 addressing of every S3 client: the Region's own virtual-hosted endpoint, <bucket>.s3.<region>.amazonaws.com
    (botocore otherwise presigns the global <bucket>.s3.amazonaws.com: a new bucket outside us-east-1 answers it
    307 for up to a day, which a browser's CORS preflight cannot follow, and Regions launched after March 2019 answer
    it 400). A configured endpoint (the local stack, AWS_ENDPOINT_URL[_S3]) keeps botocore's choice: path-style
    on a host name that cannot carry a bucket, like localhost."""
    if os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
        return {}
    return {"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"}


def _s3() -> Any:
    return client("s3", config=Config(signature_version="s3v4", s3=s3_addressing(), **API_CALLS.config()))


def _s3_ingest() -> Any:
    return client(
        "s3",
        config=Config(
            signature_version="s3v4",
            s3=s3_addressing(),
            **OBJECT_READS.config(),
            response_checksum_validation="when_required",
            max_pool_connections=64,
            tcp_keepalive=True,
        ),
    )


def _s3_complete() -> Any:
    # CompleteMultipartUpload's wait (COMPLETE_WAIT_SECONDS), within UploadPartsFunction's Timeout (29 s: the HTTP
    # API gives up at 30 s) after listing up to 10,000 parts; one attempt: a wait past it is answered "completing",
    # and the client's repeat is the retry
    return client("s3", config=Config(signature_version="s3v4", s3=s3_addressing(), **COMPLETE_CALL.config()))


def _s3_copy() -> Any:
    # the copy workflow's part copies: dfd.ingest.dropcopy.WORKERS (32) in flight, each answered when S3 has
    # copied its part
    return client(
        "s3",
        config=Config(signature_version="s3v4", s3=s3_addressing(), **COPY_CALLS.config(), max_pool_connections=40),
    )


@cache
def s3_copy() -> Any:
    """For the copy workflow's S3 calls (dfd.ingest.dropcopy): a part copy's read timeout is its copy's time."""
    return LazyClient(_s3_copy)


def _events() -> Any:
    return client("events", config=Config(**API_CALLS.config()))


@cache
def events() -> Any:
    """EventBridge: the publisher's PutEvents."""
    return LazyClient(_events)


@cache
def dynamodb() -> Any:
    return LazyClient(_dynamodb)


@cache
def s3() -> Any:
    """For presigning and small calls: SigV4 so the signed headers are enforced."""
    return LazyClient(_s3)


@cache
def s3_complete() -> Any:
    """For CompleteMultipartUpload only: its read timeout is the request's budget (dfd.uploads.multipart)."""
    return LazyClient(_s3_complete)


@cache
def s3_ingest() -> Any:
    """For reading objects: S3's stored checksums come back with every GetObject (the ingest's fast path)
    and botocore does not re-validate bodies against them — the ingest hashes every byte itself, and a second
    pass (CRC32) would cost a third of its throughput; a wide pool serves the parallel ranged reads (8) and the
    concurrent records of a batch (10)."""
    return LazyClient(_s3_ingest)


def _sqs() -> Any:
    return client("sqs", config=Config(**API_CALLS.config()))


@cache
def sqs() -> Any:
    """The ingest queue (the reconcile's re-drives)."""
    return LazyClient(_sqs)


def _sts() -> Any:
    # the Region's own endpoint, sts.<region>.amazonaws.com: botocore's default (sts_regional_endpoints) since 1.36
    return client("sts", config=Config(**API_CALLS.config()))


@cache
def sts() -> Any:
    """STS (dfd.adapters.sts: the prefix-scoped S3 credentials' AssumeRole), built on TokensFunction's first such
    request only."""
    return LazyClient(_sts)


def _stepfunctions() -> Any:
    return client("stepfunctions", config=Config(**API_CALLS.config()))


@cache
def stepfunctions() -> Any:
    """The segment workflow's starts (dfd.adapters.stepfunctions), built on the ingest's first large object."""
    return LazyClient(_stepfunctions)


def s3_endpoint_url() -> str | None:
    """The S3 endpoint every S3 client of the stack uses and presigned URLs name (the local stack's emulator,
    AWS_ENDPOINT_URL[_S3]); None on AWS, where each SDK finds the Region's own."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


@cache
def cognito() -> Any:
    """The user pool (dfd.adapters.cognito: the users of personal access tokens)."""
    return LazyClient(_cognito)
