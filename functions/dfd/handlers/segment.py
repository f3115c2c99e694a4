"""SegmentFunction: one segment of an object version hashed across invocations (statemachine/segments.asl.json
invokes it in a loop). The payload names the version by its event key — the state itself stays server-side
(docs/design/segments.md) — and the answer says what follows: ``more`` (another segment), ``done`` (the segment
that hashed the last byte committed the version through the ingest's own decision, Ingestor.commit_hashed, and
``ingest`` is its outcome: ``rejected`` when the CRC64NVME of the bytes is not the one S3 stored), ``superseded``
or ``gone``.

A payload that is not this workflow's raises SegmentInputError; any other failure raises too, so the workflow
retries the segment from the state it started at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.errors import BadRequest
from dfd.core.observability import logger, metrics, tracer
from dfd.handlers import init_done, workflow_event_key
from dfd.ingest.crc64nvme import self_test as crc64nvme_self_test
from dfd.ingest.segments import SegmentOutcome
from dfd.ingest.sha256state import self_test

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

settings()


class SegmentInputError(BadRequest):
    code = "segment_input"


def run_segment(event: Any, remaining_seconds: Any) -> dict[str, Any]:
    """One segment of the version `event["event_key"]` names, then its commit when it was the last."""
    key = workflow_event_key(event, SegmentInputError)
    result = deps.segments().hash_segment(key, remaining_seconds)
    answer: dict[str, Any] = {
        "event_key": key,
        "outcome": str(result.outcome),
        "hashed": result.hashed,
        "size": result.size,
    }
    metrics.add_metric(name="BytesHashed", unit=MetricUnit.Bytes, value=result.read)
    if result.outcome is SegmentOutcome.DONE:
        assert result.version is not None and result.digest is not None
        ingested = deps.ingestor().commit_hashed(
            result.version, result.digest, crc64nvme_mismatch=result.crc64nvme_mismatch
        )
        logger.info("ingested", extra=ingested.log_keys() | {"segmented": True})
        metrics.add_metric(name=f"Ingest_{ingested.outcome}", unit=MetricUnit.Count, value=1)
        if ingested.bytes_saved:
            metrics.add_metric(name="BytesSaved", unit=MetricUnit.Bytes, value=ingested.bytes_saved)
        answer["ingest"] = str(ingested.outcome)
    else:
        logger.info("segment hashed", extra=answer | {"read": result.read})
    return answer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_segment(event, lambda: context.get_remaining_time_in_millis() / 1000)


# the resumable SHA-256 proves itself against hashlib, the CRC64NVME against its check value, before any segment
# runs (refused: the init fails)
init_done(self_test, crc64nvme_self_test, deps.segments, deps.ingestor, aws.dynamodb().build, aws.s3_ingest().build)
