"""IngestFunction: SQS batches of S3 notifications (partial batch failures), or a direct S3 / EventBridge /
hand-written event (operators' replays). Each object goes through the exactly-once ingest decision.

The records of an SQS batch are ingested concurrently, RECORD_WORKERS at a time: a small object's ingest is
three to four AWS round trips and little CPU, so one instance moves several times the records a sequential loop
would, until its vCPU binds (docs/scaling.md). Every record is handed to a thread of a bounded pool as the batch
arrives, and each failed record is reported on its own (`batchItemFailures`: ingest_batch). Correctness does not
depend on the order: each record is one independent, idempotent ingest (the same event, or the same content, twice
in one batch is resolved by DynamoDB's conditions, exactly as across batches).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.errors import InvalidEvent
from dfd.core.notifications import ObjectRef, check_sqs_batch, is_sqs_batch, refs_from_message_body, refs_from_payload
from dfd.core.observability import logger, metrics, tracer
from dfd.handlers import init_done

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from dfd.ingest.service import IngestResult

# Records of one batch in flight at once: the event source's BatchSize (template.yaml), so a full batch runs
# in one wave. dfd.adapters.aws sizes the DynamoDB pool (32) and the ingest's S3 pool (64) above it. Large objects'
# ranged reads share the ingest's one range pool (8 connections); each holds its own part buffers (48 MiB),
# so ten large objects at once hold ~480 MiB, within IngestMemorySize (1769 MB).
RECORD_WORKERS = 10

settings()
_records = ThreadPoolExecutor(max_workers=RECORD_WORKERS, thread_name_prefix="dfd-record")
_metrics_lock = threading.Lock()  # Powertools' metric set is a plain dict: one writer at a time


def _metric(name: str, unit: MetricUnit, value: float) -> None:
    with _metrics_lock:
        metrics.add_metric(name=name, unit=unit, value=value)


def ingest_one(ref: ObjectRef) -> IngestResult:
    result = deps.ingestor().ingest(ref)
    logger.info("ingested", extra=result.log_keys())
    _metric(f"Ingest_{result.outcome}", MetricUnit.Count, 1)
    if result.bytes_saved:
        _metric("BytesSaved", MetricUnit.Bytes, result.bytes_saved)
    if result.hashed_bytes:
        _metric("BytesHashed", MetricUnit.Bytes, result.hashed_bytes)
    return result


def ingest_record(message_id: str, body: str) -> None:
    """One SQS message (an S3 notification document): every object it names, or an exception (the record then
    stays on the queue, reported in batchItemFailures)."""
    try:
        refs = refs_from_message_body(body)
    except InvalidEvent as error:
        logger.error("malformed message", extra={"message_id": message_id, "error": error.message})
        _metric("IngestMalformed", MetricUnit.Count, 1)
        raise
    if not refs:
        logger.info("nothing to ingest", extra={"message_id": message_id, "outcome": "ignored"})
    for ref in refs:
        ingest_one(ref)


def ingest_batch(event: dict[str, Any]) -> dict[str, Any]:
    """Every record of a checked SQS batch (check_sqs_batch: unique messageIds, string bodies) on the pool at once;
    the partial batch response names each record whose ingest raised (a batch whose records all fail returns them
    all).

    Not Powertools' batch processor: its module imports asyncio and the data classes of three stream sources
    (~11 ms, 4 % of this function's cold start: docs/performance.md, target 7) to build this one list."""
    deps.ingestor()  # built (at init, or again after deps.reset()) before the records' threads share it
    running = {r["messageId"]: _records.submit(ingest_record, r["messageId"], r["body"]) for r in event["Records"]}
    failures = []
    for message_id, future in running.items():
        error = future.exception()
        if error is not None:
            logger.warning("record stays on the queue", extra={"message_id": message_id, "error": repr(error)[:500]})
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_sqs_batch(event):
        try:
            check_sqs_batch(event)
        except InvalidEvent as error:
            logger.error("malformed SQS batch", extra={"error": error.message})
            _metric("IngestMalformed", MetricUnit.Count, 1)
            raise
        return ingest_batch(event)
    try:
        refs = refs_from_payload(event)
    except InvalidEvent as error:
        logger.error("malformed event", extra={"error": error.message})
        _metric("IngestMalformed", MetricUnit.Count, 1)
        raise
    results = [ingest_one(ref).log_keys() for ref in refs]
    return {"results": results, "count": len(results)}


init_done(deps.ingestor, aws.dynamodb().build, aws.s3_ingest().build)
