"""IngestFunction: SQS batches of S3 notifications (partial batch failures), or a direct S3 / EventBridge /
hand-written event (operators' replays). Each object goes through the exactly-once ingest decision."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from dfd import deps
from dfd.config import settings
from dfd.errors import InvalidEvent
from dfd.events import ObjectRef, check_sqs_batch, is_sqs_batch, refs_from_message_body, refs_from_payload
from dfd.ingest import IngestResult
from dfd.observability import logger, metrics, tracer

settings()
# every record is reported on its own: a batch whose records all fail returns them all as failures
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def ingest_one(ref: ObjectRef) -> IngestResult:
    result = deps.ingestor().ingest(ref)
    logger.info("ingested", extra=result.log_keys())
    metrics.add_metric(name=f"Ingest_{result.outcome}", unit=MetricUnit.Count, value=1)
    if result.bytes_saved:
        metrics.add_metric(name="BytesSaved", unit=MetricUnit.Bytes, value=result.bytes_saved)
    if result.hashed_bytes:
        metrics.add_metric(name="BytesHashed", unit=MetricUnit.Bytes, value=result.hashed_bytes)
    return result


def record_handler(record: SQSRecord) -> None:
    try:
        refs = refs_from_message_body(record.body)
    except InvalidEvent as error:
        logger.error("malformed message", extra={"message_id": record.message_id, "error": error.message})
        metrics.add_metric(name="IngestMalformed", unit=MetricUnit.Count, value=1)
        raise
    if not refs:
        logger.info("nothing to ingest", extra={"message_id": record.message_id, "outcome": "ignored"})
    for ref in refs:
        ingest_one(ref)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_sqs_batch(event):
        try:
            check_sqs_batch(event)
        except InvalidEvent as error:
            logger.error("malformed SQS batch", extra={"error": error.message})
            metrics.add_metric(name="IngestMalformed", unit=MetricUnit.Count, value=1)
            raise
        return process_partial_response(  # type: ignore[return-value]
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    try:
        refs = refs_from_payload(event)
    except InvalidEvent as error:
        logger.error("malformed event", extra={"error": error.message})
        metrics.add_metric(name="IngestMalformed", unit=MetricUnit.Count, value=1)
        raise
    results = [ingest_one(ref).log_keys() for ref in refs]
    return {"results": results, "count": len(results)}
