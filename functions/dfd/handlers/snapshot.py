"""SnapshotFunction: every 5 minutes (its schedule), one snapshot of the counter totals into the stats history
(dfd.history.service). An event with `now` (ISO-8601) takes it at that time instead of the clock's: how
scripts/history writes a simulated week on the local stack."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dfd import deps
from dfd.adapters import aws
from dfd.core import clock
from dfd.core.config import settings
from dfd.core.observability import logger, tracer
from dfd.handlers import init_done
from dfd.history.service import take_snapshot

if TYPE_CHECKING:
    from datetime import datetime

    from aws_lambda_powertools.utilities.typing import LambdaContext

settings()


class SnapshotInputError(ValueError):
    """An event whose `now` is not an ISO-8601 time: the invocation fails, nothing is written."""


def _now(event: Any) -> datetime:
    raw = event.get("now") if isinstance(event, Mapping) else None
    if raw is None:
        return clock.now()
    try:
        moment = clock.parse(str(raw))
    except ValueError:
        raise SnapshotInputError(f"now must be an ISO-8601 time, got {str(raw)[:64]!r}") from None
    if moment.tzinfo is None:
        raise SnapshotInputError("now must name its time zone (…Z)")
    return moment


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    snapshot = take_snapshot(deps.repository(), _now(event))
    result = {"taken_at": snapshot.taken_at, "totals": dict(snapshot.totals)}
    logger.info("snapshot", extra=result)
    return result


init_done(deps.repository, aws.dynamodb().build)
