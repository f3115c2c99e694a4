"""Wiring: settings → clients → adapters → domain services, built once per process on first use.

Each factory imports its service when it is first called, so a function imports only what its first request
needs: the read functions never load the ingest, upload, multipart or delete services (their cost to a cold
start: docs/performance.md, target 7).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

from dfd.adapters import aws
from dfd.core.config import settings

if TYPE_CHECKING:
    from dfd.adapters.cognito import CognitoDirectory
    from dfd.adapters.dynamo import Repository
    from dfd.deletes.service import DeleteService
    from dfd.history.service import History
    from dfd.history.tenants import Tenants
    from dfd.identity.credentials import CredentialChecker, LfsSettings
    from dfd.identity.pats import PatService
    from dfd.identity.s3credentials import S3CredentialsService
    from dfd.identity.s3sessions import S3Writers
    from dfd.ingest.dropcopy import CopyHandoff, DropCopies
    from dfd.ingest.ports import ProgressReads
    from dfd.ingest.segments import Segments
    from dfd.ingest.service import Handoff, Ingestor
    from dfd.lfs.batch import LfsService
    from dfd.lfs.locks import LockService
    from dfd.queries.service import Queries
    from dfd.reconcile.service import Reconciler
    from dfd.uploads.multipart import MultipartService
    from dfd.uploads.service import UploadService


@cache
def repository() -> Repository:
    from dfd.adapters.dynamo import Repository

    return Repository(aws.dynamodb(), settings())


@cache
def queries() -> Queries:
    from dfd.adapters.s3 import ObjectStore
    from dfd.queries.service import Queries

    return Queries(settings(), repository(), ObjectStore(aws.s3()), progress=hashing_progress())


@cache
def history() -> History:
    from dfd.history.service import History

    return History(repository())


@cache
def tenants() -> Tenants:
    from dfd.history.tenants import Tenants

    return Tenants(settings(), repository())


@cache
def upload_service() -> UploadService:
    from dfd.adapters.s3 import ObjectStore
    from dfd.uploads.service import UploadService

    return UploadService(settings(), repository(), ObjectStore(aws.s3()))


@cache
def multipart_service() -> MultipartService:
    from dfd.adapters.s3 import ObjectStore
    from dfd.uploads.multipart import MultipartService

    return MultipartService(settings(), repository(), ObjectStore(aws.s3(), complete_client=aws.s3_complete()))


@cache
def delete_service() -> DeleteService:
    from dfd.deletes.service import DeleteService

    return DeleteService(settings(), repository(), multipart_service())


@cache
def ingestor() -> Ingestor:
    from dfd.adapters.s3 import ObjectStore, ReadTuning
    from dfd.ingest.service import Ingestor

    tuning = ReadTuning.from_settings(settings())
    objects = ObjectStore(aws.s3_ingest(), aws.s3(), tuning=tuning)
    # built at the first drop-zone object: the functions that ingest only upload keys need none of its settings
    return Ingestor(
        settings(),
        repository(),
        objects,
        writers=lambda tenant, owner: s3_writers().admits(tenant, owner),
        handoff=handoff(),
        copies=copy_handoff(),
    )


@cache
def s3_writers() -> S3Writers:
    """The drop zone's check of an object's writer: the tokens table's records and the user pool."""
    from dfd.adapters.cognito import CognitoDirectory
    from dfd.adapters.dynamo.pats import DynamoTokenStore
    from dfd.adapters.dynamo.s3sessions import DynamoS3SessionStore
    from dfd.core.config import required_env
    from dfd.identity.s3sessions import S3Writers

    table = required_env("LFS_TOKENS_TABLE")
    return S3Writers(
        DynamoS3SessionStore(aws.dynamodb(), table),
        DynamoTokenStore(aws.dynamodb(), table),
        CognitoDirectory(aws.cognito(), required_env("USER_POOL_ID")),
    )


def handoff() -> Handoff | None:
    """The hand-off of objects above SEGMENT_THRESHOLD_BYTES to the segment workflow SEGMENT_STATE_MACHINE_ARN
    names; None (every object hashed inline) without that ARN."""
    threshold = handoff_threshold()
    if threshold is None:
        return None
    from dfd.adapters.stepfunctions import SegmentWorkflow
    from dfd.ingest.service import Handoff

    return Handoff(threshold, segments(), SegmentWorkflow(aws.stepfunctions(), os.environ["SEGMENT_STATE_MACHINE_ARN"]))


def hashing_progress() -> tuple[int, ProgressReads] | None:
    """The segment threshold and the hashing progress of objects above it (GET /metadata, the reconcile's pending
    uploads); None without the segment workflow."""
    threshold = handoff_threshold()
    if threshold is None:
        return None
    from dfd.adapters.dynamo.hashing import DynamoHashingStore

    s = settings()
    return threshold, DynamoHashingStore(aws.dynamodb(), s.events_table, s.event_ttl_days)


def handoff_threshold() -> int | None:
    """Objects above it are hashed across invocations (SEGMENT_THRESHOLD_BYTES, default 16 GiB); None without the
    segment workflow (SEGMENT_STATE_MACHINE_ARN)."""
    if not os.environ.get("SEGMENT_STATE_MACHINE_ARN"):
        return None
    from dfd.ingest.segments import HANDOFF_THRESHOLD

    return int(os.environ.get("SEGMENT_THRESHOLD_BYTES") or HANDOFF_THRESHOLD)


@cache
def segments() -> Segments:
    """The segment hashing of large objects (dfd.ingest.segments): its state items in the Events table, its reads
    through the ingest's S3 client; SEGMENT_BYTES caps one segment (default: dfd.ingest.segments.SEGMENT_BYTES)."""
    from dfd.adapters.dynamo.hashing import DynamoHashingStore
    from dfd.adapters.s3 import ObjectStore, ReadTuning
    from dfd.ingest.segments import SEGMENT_BYTES, Segments

    s = settings()
    store = DynamoHashingStore(aws.dynamodb(), s.events_table, s.event_ttl_days)
    objects = ObjectStore(aws.s3_ingest(), aws.s3(), tuning=ReadTuning.from_settings(s))
    return Segments(store, objects, segment_bytes=int(os.environ.get("SEGMENT_BYTES") or SEGMENT_BYTES))


def copy_handoff() -> CopyHandoff | None:
    """The hand-off of drop-zone objects above COPY_THRESHOLD_BYTES (default dfd.ingest.dropcopy.COPY_THRESHOLD) to
    the copy workflow COPY_STATE_MACHINE_ARN names; None (every drop-zone object copied inline) without that ARN."""
    arn = os.environ.get("COPY_STATE_MACHINE_ARN")
    if not arn:
        return None
    from dfd.adapters.stepfunctions import SegmentWorkflow
    from dfd.ingest.dropcopy import COPY_THRESHOLD, CopyHandoff

    threshold = int(os.environ.get("COPY_THRESHOLD_BYTES") or COPY_THRESHOLD)
    # the same Step Functions adapter as the segment workflow's: one named execution, input {"event_key": ...}
    return CopyHandoff(threshold, drop_copies(), SegmentWorkflow(aws.stepfunctions(), arn))


@cache
def drop_copies() -> DropCopies:
    """The drop zone's copies across invocations (dfd.ingest.dropcopy): their items in the Events table, their S3
    calls through the copy client; COPY_PART_BYTES is the smallest part (default 512 MiB; tests lower it)."""
    from dfd.adapters.dynamo.copies import DynamoCopyStore
    from dfd.adapters.s3 import ObjectStore
    from dfd.core.copyparts import COPY_PART, copy_part_bytes
    from dfd.ingest.dropcopy import DropCopies

    s = settings()
    store = DynamoCopyStore(aws.dynamodb(), s.events_table, s.event_ttl_days)
    objects = ObjectStore(aws.s3_copy(), aws.s3(), complete_client=aws.s3_copy())
    smallest = int(os.environ.get("COPY_PART_BYTES") or COPY_PART)
    return DropCopies(store, objects, part_bytes=lambda size: copy_part_bytes(size, smallest))


@cache
def lfs_settings() -> LfsSettings:
    from dfd.identity.credentials import LfsSettings

    return LfsSettings.from_env()


@cache
def pat_service() -> PatService:
    from dfd.adapters.dynamo.pats import DynamoTokenStore
    from dfd.identity.pats import PatService

    return PatService(DynamoTokenStore(aws.dynamodb(), lfs_settings().tokens_table), user_directory())


@cache
def user_directory() -> CognitoDirectory:
    from dfd.adapters.cognito import CognitoDirectory

    return CognitoDirectory(aws.cognito(), lfs_settings().user_pool_id)


@cache
def credentials() -> CredentialChecker:
    from dfd.identity.credentials import CredentialChecker, verifier_for

    return CredentialChecker(verifier_for(lfs_settings()), pat_service())


@cache
def s3_credentials() -> S3CredentialsService:
    from dfd.adapters.dynamo.s3sessions import DynamoS3SessionStore
    from dfd.adapters.sts import StsRoles
    from dfd.core.config import required_env
    from dfd.identity.s3credentials import S3CredentialsService, S3CredentialsSettings
    from dfd.identity.s3sessions import S3SessionLedger

    config = S3CredentialsSettings(
        role_arn=required_env("S3_CREDENTIALS_ROLE_ARN"),
        bucket=settings().bucket,
        region=os.environ.get("AWS_REGION") or required_env("AWS_DEFAULT_REGION"),
        endpoint_url=aws.s3_endpoint_url(),
        kms_key_arn=os.environ.get("KMS_KEY_ARN", "").strip(),
    )
    ledger = S3SessionLedger(DynamoS3SessionStore(aws.dynamodb(), lfs_settings().tokens_table))
    return S3CredentialsService(StsRoles(aws.sts()), config, user_directory(), ledger)


@cache
def lock_service() -> LockService:
    from dfd.adapters.dynamo.locks import DynamoLockStore
    from dfd.lfs.locks import LockService

    return LockService(DynamoLockStore(aws.dynamodb(), lfs_settings().locks_table))


@cache
def lfs_service() -> LfsService:
    from dfd.adapters.s3 import ObjectStore
    from dfd.lfs.batch import LfsService, basic_max_bytes

    return LfsService(
        settings(),
        repository(),
        ObjectStore(aws.s3()),
        upload_service(),
        ingestor().ingest,
        basic_max_bytes=basic_max_bytes(),
        multipart=multipart_service(),
    )


@cache
def reconciler() -> Reconciler:
    from dfd.adapters.queue import SqsIngestQueue
    from dfd.adapters.s3 import ObjectStore
    from dfd.core.config import required_env
    from dfd.reconcile.service import Reconciler

    queue = SqsIngestQueue(aws.sqs(), required_env("INGEST_QUEUE_URL"))
    return Reconciler(settings(), repository(), ObjectStore(aws.s3()), queue, hashing=hashing_progress())


def reset() -> None:
    """Forget every cached client and service (tests and the local stack change the environment)."""
    for factory in (
        repository,
        queries,
        history,
        tenants,
        upload_service,
        multipart_service,
        delete_service,
        ingestor,
        segments,
        drop_copies,
        lfs_settings,
        pat_service,
        credentials,
        s3_credentials,
        s3_writers,
        user_directory,
        lock_service,
        lfs_service,
        reconciler,
        settings,
        aws.dynamodb,
        aws.s3,
        aws.s3_ingest,
        aws.s3_copy,
        aws.events,
        aws.cognito,
        aws.sts,
        aws.sqs,
        aws.session,
    ):
        factory.cache_clear()
