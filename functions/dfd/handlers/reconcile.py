"""ReconcileFunction: the reconcile workflow's steps (statemachine/reconcile.asl.json invokes it), one entry per
step — ``begin``, a page of a phase (``pending``, ``reap``, ``references``, ``orphans``, ``files``), ``finish`` and
``abandon`` — named by the payload's ``entry``; the run's state travels in ``state`` (dfd.reconcile.service).

Every failure raises — a payload that is not this workflow's (ReconcileInputError) as much as an AWS error no rule
answers — so the execution fails and its alarm fires (the workflow retries Lambda's own transient errors only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.observability import logger, metrics, tracer
from dfd.handlers import init_done
from dfd.reconcile.service import PAGE, ReconcileInputError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

settings()


def _emit(name: str, value: float, unit: str) -> None:
    metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)


def _state(event: Mapping[str, Any]) -> Mapping[str, Any]:
    state = event.get("state")
    if not isinstance(state, Mapping):
        raise ReconcileInputError("the payload has no reconcile state")
    return state


def _entries() -> dict[str, Callable[[Mapping[str, Any]], Any]]:
    reconciler = deps.reconciler()
    entries: dict[str, Callable[[Mapping[str, Any]], Any]] = {
        "begin": lambda event: reconciler.begin(event.get("input") or {}),
        "finish": lambda event: reconciler.finish(_state(event)),
        "abandon": lambda event: reconciler.abandon(_state(event)),
    }
    for phase in PAGE:
        entries[phase] = lambda event, phase=phase: reconciler.page(phase, _state(event), _emit)  # type: ignore[misc]
    return entries


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> Any:
    entry = event.get("entry") if isinstance(event, Mapping) else None
    step = _entries().get(str(entry))
    if step is None:
        raise ReconcileInputError(f"unknown reconcile entry {entry!r}")
    result = step(event)
    if isinstance(result, Mapping) and "pos" in result:
        logger.debug("reconcile step", extra={"entry": entry, "pos": result["pos"], "tally": result["tally"]})
    elif isinstance(result, Mapping):  # a run's summary, or its "skipped"
        logger.info("reconcile run", extra={"entry": entry, "result": result})
    return result


init_done(deps.reconciler, aws.dynamodb().build)
