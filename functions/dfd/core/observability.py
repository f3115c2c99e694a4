"""Powertools Logger, Tracer and Metrics shared by every function (service/namespace from the environment).

Powertools' Tracer imports the X-Ray SDK as it is built (auto_patch or not), and outside Lambda the SDK then
builds two botocore clients for its sampler (their cost to a cold start: docs/performance.md, target 7).
The Tracer here gets a provider that imports the SDK on the first traced invocation instead, and never when
tracing is off (POWERTOOLS_TRACE_DISABLED, AWS_XRAY_SDK_ENABLED=false, or outside Lambda) or when Lambda did not
sample the invocation (`Sampled=0` in its trace header: the SDK would record into a dummy subsegment that is
never sent) — so an unsampled cold start never loads the SDK at all.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.tracing.base import BaseProvider

TRACE_HEADER_ENV = "_X_AMZN_TRACE_ID"  # set by the Lambda runtime for every invocation


def _unsampled(header: str) -> bool:
    """Lambda decided not to sample this invocation ("Root=...;Parent=...;Sampled=0")."""
    return any(part.strip() == "Sampled=0" for part in header.split(";"))


class _Untraced:
    """What a subsegment offers Powertools' capture_lambda_handler, recording nothing."""

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass


class LazyXRayProvider(BaseProvider):
    """Powertools tracing provider that loads the X-Ray recorder on the first subsegment it must record."""

    def __init__(self) -> None:
        self.disabled = False
        self._recorder: Any = None

    def _enabled(self) -> bool:
        if self.disabled:
            return False
        if os.environ.get("AWS_XRAY_SDK_ENABLED", "true").strip().lower() in {"false", "0", "no"}:
            return False
        return not _unsampled(os.environ.get(TRACE_HEADER_ENV, ""))

    @property
    def recorder(self) -> Any:
        if self._recorder is None:
            from aws_xray_sdk.core import xray_recorder

            self._recorder = xray_recorder
        return self._recorder

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[Any]:
        if not self._enabled():
            yield _Untraced()
            return
        with self.recorder.in_subsegment(name=name, **kwargs) as subsegment:
            yield subsegment

    def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> Any:
        return self.recorder.in_subsegment_async(name=name, **kwargs)

    def put_annotation(self, key: str, value: Any) -> None:
        if self._enabled():
            self.recorder.put_annotation(key=key, value=value)

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        if self._enabled():
            self.recorder.put_metadata(key=key, value=value, namespace=namespace)

    def patch(self, modules: Any) -> None:
        from aws_xray_sdk.core import patch

        patch(modules)

    def patch_all(self) -> None:
        from aws_xray_sdk.core import patch_all

        patch_all()


class _Formatter(LambdaPowertoolsFormatter):
    """Powertools' JSON lines without the keys every line would repeat (function name, ARN and memory: the log
    group carries them, and the service, one for every function; cold start: Lambda's Init Duration metric), nor,
    below WARNING, the source location (the message names what happened): ~250 bytes a line that CloudWatch Logs
    bills (docs/design.md, "Cost"). The level, time, message, request id and correlation id stay."""

    def serialize(self, log: dict[str, Any]) -> str:  # type: ignore[override]
        for key in _REPEATED:
            log.pop(key, None)
        if log.get("level") in ("DEBUG", "INFO"):
            log.pop("location", None)
        return super().serialize(log)


_REPEATED = ("function_name", "function_arn", "function_memory_size", "cold_start", "service")
logger = Logger(logger_formatter=_Formatter())
# auto_patch off: patching botocore would trace every AWS call, at the price of the SDK at init.
_provider = LazyXRayProvider()
tracer = Tracer(auto_patch=False, provider=_provider)
_provider.disabled = bool(tracer.disabled)
metrics = Metrics()

# a request that emits no metric (a 400, a TestEvent) is normal: no warning for the empty flush
warnings.filterwarnings("ignore", message="No application metrics to publish")
