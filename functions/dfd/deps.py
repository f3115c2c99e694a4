"""Wiring: settings → clients → adapters → domain services, built once per process on first use.

The services are imported here at module level: importing them only inside their factories (so a read function
never loaded the ingest or the upload service) saved 4-7 ms CPU of a cold start (docs/performance.md, target 7:
under the 10 ms that pays for machinery), so it was removed.
"""

from __future__ import annotations

from functools import cache

from dfd import aws
from dfd.adapters.dynamo import Repository
from dfd.adapters.s3 import ObjectStore, ReadTuning
from dfd.config import settings
from dfd.deletes import DeleteService
from dfd.ingest import Ingestor
from dfd.multipart import MultipartService
from dfd.queries import Queries
from dfd.uploads import UploadService


@cache
def repository() -> Repository:
    return Repository(aws.dynamodb(), settings())


@cache
def queries() -> Queries:
    return Queries(settings(), repository(), ObjectStore(aws.s3()))


@cache
def upload_service() -> UploadService:
    return UploadService(settings(), repository(), ObjectStore(aws.s3()))


@cache
def multipart_service() -> MultipartService:
    return MultipartService(settings(), repository(), ObjectStore(aws.s3()))


@cache
def delete_service() -> DeleteService:
    return DeleteService(settings(), repository(), multipart_service())


@cache
def ingestor() -> Ingestor:
    tuning = ReadTuning.from_settings(settings())
    return Ingestor(settings(), repository(), ObjectStore(aws.s3_ingest(), aws.s3(), tuning=tuning))


def reset() -> None:
    """Forget every cached client and service (tests and the local stack change the environment)."""
    for factory in (
        repository,
        queries,
        upload_service,
        multipart_service,
        delete_service,
        ingestor,
        settings,
        aws.dynamodb,
        aws.s3,
        aws.s3_ingest,
    ):
        factory.cache_clear()
