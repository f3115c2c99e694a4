"""PublisherFunction: the Uploads and FileMetadata tables' DynamoDB streams -> dfd's outcomes on its event bus.

An outbox in effect: every committed change of an upload or a content — whichever path wrote it (the API, the
ingest, the reconcile workflow, the reaper) — reaches this function once it committed, and nothing else does
(dfd.adapters.publisher, dfd.events.outcomes). Partial batch failures (Powertools batch processing): a record
whose events the bus did not take is reported failed; Lambda retries from it (bisecting the batch), and after
the mapping's retries the batch's description goes to the on-failure destination (the PublisherDLQ queue).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from dfd.adapters import aws
from dfd.adapters.eventbridge import EventBridgeSink
from dfd.adapters.publisher import BatchResult, Tables, publish
from dfd.core.config import ConfigError, settings
from dfd.core.observability import logger, metrics, tracer
from dfd.handlers import init_done

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext


class Unpublished(RuntimeError):
    """Some event of this record is not on the bus: the record is delivered again."""


def _bus() -> str:
    bus = os.environ.get("EVENT_BUS_NAME", "").strip()
    if not bus:
        raise ConfigError("environment variable EVENT_BUS_NAME is required")
    return bus


TABLES = Tables(uploads=settings().uploads_table, files=settings().files_table)
BUS = _bus()


def sink() -> EventBridgeSink:
    return EventBridgeSink(aws.events(), BUS, log=lambda message, extra: logger.warning(message, extra=extra))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    if not records:
        return {"batchItemFailures": []}
    result = publish(records, TABLES, sink())
    _report(result)
    failed = set(result.failed)

    def record_handler(record: DynamoDBRecord) -> None:
        if record.dynamodb is not None and record.dynamodb.sequence_number in failed:
            raise Unpublished(record.dynamodb.sequence_number)

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    return process_partial_response(  # type: ignore[return-value]
        event=event, record_handler=record_handler, processor=processor, context=context
    )


def _report(result: BatchResult) -> None:
    """One INFO line per batch (CloudWatch Logs bills every byte: docs/design.md, "Cost"); each event and each
    record without an outcome at DEBUG."""
    for event in result.published:
        logger.debug("published", extra={"detail_type": event.detail_type.value, "event_id": event.event_id})
    for number, why in result.skipped:
        logger.debug("no outcome", extra={"sequence_number": number, "why": why})
    if result.published:
        logger.info("batch published", extra={"events": len(result.published), "skipped": len(result.skipped)})
    metrics.add_metric(name="EventsPublished", unit=MetricUnit.Count, value=len(result.published))
    if result.failed:
        logger.warning("records not published", extra={"sequence_numbers": result.failed})
        metrics.add_metric(name="EventsUnpublished", unit=MetricUnit.Count, value=len(result.failed))


init_done(aws.events().build)
