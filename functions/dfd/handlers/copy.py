"""CopyFunction: one step of a drop-zone object's copy to its upload key across invocations
(statemachine/copies.asl.json invokes it in a loop). The payload names the object version by its event key — the
multipart upload stays server-side (docs/design/dropzone-copies.md) — and the answer says what follows: ``more``
(another step), ``done`` (completed at the upload key, whose own event drives the ingest; the s3/ object deleted),
``superseded`` or ``gone`` (the source moved on: the upload aborted).

A payload that is not this workflow's raises CopyInputError; any other failure raises too, so the workflow
retries the step (it lists the parts S3 holds again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.errors import BadRequest
from dfd.core.observability import logger, metrics, tracer
from dfd.handlers import init_done, workflow_event_key

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

settings()


class CopyInputError(BadRequest):
    code = "copy_input"


def run_copy(event: Any, remaining_seconds: Callable[[], float]) -> dict[str, Any]:
    """One step of the copy of the version `event["event_key"]` names."""
    key = workflow_event_key(event, CopyInputError)
    result = deps.drop_copies().copy_step(key, remaining_seconds)
    answer: dict[str, Any] = {
        "event_key": key,
        "outcome": str(result.outcome),
        "copied": result.copied,
        "size": result.size,
        "parts": result.parts,
    }
    if result.deleted:
        answer["deleted"] = True
    metrics.add_metric(name=f"Copy_{result.outcome}", unit=MetricUnit.Count, value=1)
    logger.info("copy step", extra=answer)
    return answer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_copy(event, lambda: context.get_remaining_time_in_millis() / 1000)


init_done(deps.drop_copies, aws.dynamodb().build, aws.s3_copy().build)
