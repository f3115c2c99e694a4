"""Hosts the template's functions in this process: imports ``module.function`` and invokes it like Lambda.

Every front end (HTTP API, Lambda Invoke API, SQS poller) goes through :meth:`Runtime.invoke`, which never
raises for a handler's failure: it returns an :class:`Invocation` whose ``error`` has Lambda's shape
(``errorMessage``, ``errorType``, ``stackTrace``). A handler that cannot be imported yet (being written) is
retried on every invocation, so the stack can start before all handlers exist.

Invocations run concurrently in the servers' threads, like concurrent Lambda instances would, except that
they share one process: module state, the Powertools Metrics singleton and os.environ are shared (metric
operations are serialized: see :func:`serialize_powertools_metrics`; the state Powertools' HTTP resolvers keep of
the request they resolve is made per thread: see :func:`isolate_powertools_resolvers`).
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfdlocal.names import ACCOUNT_ID, REGION
from dfdlocal.template import FunctionDef

log = logging.getLogger("dfdlocal.lambda")

Handler = Callable[[Any, Any], Any]


class LambdaContext:
    """The attributes and method of the Python runtime's context object."""

    def __init__(self, function: FunctionDef, request_id: str) -> None:
        self.function_name = function.logical_id
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function.logical_id}"
        self.memory_limit_in_mb = function.memory_size
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function.logical_id}"
        self.log_stream_name = f"local/[$LATEST]{request_id.replace('-', '')}"
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + function.timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass(frozen=True)
class Invocation:
    function: str
    request_id: str
    result: Any
    error: dict[str, Any] | None  # Lambda's error payload when the function failed
    duration_ms: float

    @property
    def ok(self) -> bool:
        return self.error is None

    def payload(self) -> bytes:
        """The bytes Lambda's Invoke API returns (the error document for a failed invocation)."""
        return json.dumps(self.error if self.error is not None else self.result).encode()


_METRICS_LOCK = threading.RLock()
_METRICS_METHODS = (
    "add_metric",
    "add_dimension",
    "add_metadata",
    "serialize_metric_set",
    "flush_metrics",
    "clear_metrics",
)


def serialize_powertools_metrics() -> bool:
    """One Powertools metric operation at a time in this process (idempotent; False without Powertools).

    Lambda runs one invocation per process at a time; here concurrent invocations share Powertools' metric set.
    Unserialized, a flush fails the invocation that runs it: the set changes size while the flush serializes it
    (another invocation's ``add_metric``: "dictionary changed size during iteration"), or another invocation's
    flush empties it between this flush's emptiness check and its serialization ("Must contain at least one
    metric", Powertools' SchemaValidationError). Serialized, a flush publishes what every invocation added so far.
    """
    try:
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider
    except ImportError:  # pragma: no cover - Powertools is a dependency of the functions
        return False
    provider: Any = AmazonCloudWatchEMFProvider
    if getattr(provider, "_dfd_serialized", False):
        return True
    for name in _METRICS_METHODS:
        setattr(provider, name, _under_metrics_lock(getattr(provider, name)))
    provider._dfd_serialized = True
    return True


def _under_metrics_lock(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _METRICS_LOCK:
            return method(*args, **kwargs)

    return locked


class _PerThread:
    """A data descriptor whose value is per thread (and per object, unless `shared`): a thread that has not set it
    reads a shallow copy of the last value set by any thread, else of the object's own from before the descriptor
    was installed (None when there is none)."""

    def __init__(self, name: str, shared: bool) -> None:
        self._name = name
        self._shared = shared
        self._local = threading.local()
        self._last: dict[int, Any] = {}

    def _key(self, obj: object) -> int:
        return 0 if self._shared else id(obj)

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        values: dict[int, Any] = self._local.__dict__.setdefault("values", {})
        key = self._key(obj)
        if key not in values:
            if key in self._last:
                values[key] = copy.copy(self._last[key])
            else:
                values[key] = copy.copy(getattr(obj, "__dict__", {}).get(self._name))
        return values[key]

    def __set__(self, obj: object, value: Any) -> None:
        key = self._key(obj)
        self._local.__dict__.setdefault("values", {})[key] = value
        self._last[key] = value


def isolate_powertools_resolvers() -> bool:
    """The state Powertools' HTTP resolvers keep of the request they resolve, per thread (idempotent; False without
    Powertools): on Lambda one invocation per process makes it that request's; here invocations run concurrently in
    one process. `BaseRouter.current_event` and `lambda_context` are class attributes (set on the class by
    `resolve`, so for every app at once), `context` (the matched route, its path arguments) and
    `processed_stack_frames` an app's own: unisolated, concurrent HTTP API invocations would read each other's
    requests (a request answered with another's path and body). Isolated, they run in parallel as the functions'
    instances do on AWS (docs/local-stack.md)."""
    try:
        from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, BaseRouter
    except ImportError:  # pragma: no cover - Powertools is a dependency of the functions
        return False
    if getattr(BaseRouter, "_dfd_per_thread", False):
        return True
    event, context = _PerThread("current_event", shared=True), _PerThread("lambda_context", shared=True)
    for name, value in (("current_event", event), ("lambda_context", context)):
        type.__setattr__(BaseRouter, name, value)  # read through an app (self.current_event)

    class PerThreadRouterType(type(BaseRouter)):  # type: ignore[misc]
        """`BaseRouter.current_event = ...` (a class attribute set): the descriptors' own, per thread."""

        current_event = event
        lambda_context = context

    BaseRouter.__class__ = PerThreadRouterType  # type: ignore[method-assign]
    for name in ("context", "processed_stack_frames"):
        type.__setattr__(ApiGatewayResolver, name, _PerThread(name, shared=False))
    type.__setattr__(BaseRouter, "_dfd_per_thread", True)
    return True


class Runtime:
    def __init__(self, functions: Mapping[str, FunctionDef], root: Path, *, readable_logs: bool = False) -> None:
        self.functions = dict(functions)
        self.root = root
        self.readable_logs = readable_logs
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()
        serialize_powertools_metrics()  # before any handler runs: invocations here are concurrent
        isolate_powertools_resolvers()

    def resolve(self, name: str) -> str | None:
        """Logical id for a function name, ARN or ``name:qualifier`` (None when unknown)."""
        if name.startswith("arn:"):
            parts = name.split(":")
            name = parts[6] if len(parts) > 6 else ""
        else:
            name = name.split(":", 1)[0]
        return name if name in self.functions else None

    def register(self, function: FunctionDef, handler: Handler) -> None:
        """Host a callable directly instead of importing ``function.handler`` (tests, tools)."""
        with self._lock:
            self.functions[function.logical_id] = function
            self._handlers[function.logical_id] = handler

    def load_all(self) -> dict[str, str]:
        """Import every handler now; returns the import errors by function (empty when all load)."""
        errors: dict[str, str] = {}
        for name in self.functions:
            try:
                self._handler(name)
            except _ImportFailure as failure:
                errors[name] = str(failure.error["errorMessage"])
        return errors

    def _handler(self, name: str) -> Handler:
        with self._lock:
            if name in self._handlers:
                return self._handlers[name]
            function = self.functions[name]
            importlib.invalidate_caches()  # a handler written since the last attempt
            try:
                module = importlib.import_module(function.module)
            except Exception as exc:
                raise _ImportFailure(
                    "Runtime.ImportModuleError",
                    f"Unable to import module '{function.module}': {exc}",
                    exc,
                ) from exc
            handler: Handler | None = getattr(module, function.attribute, None)
            if handler is None or not callable(handler):
                raise _ImportFailure(
                    "Runtime.HandlerNotFound",
                    f"Handler '{function.attribute}' missing on module '{function.module}'",
                    None,
                )
            self._warn_if_outside_code_uri(function, module)
            if self.readable_logs:
                readable_powertools_lines()
            self._handlers[name] = handler
            return handler

    def _warn_if_outside_code_uri(self, function: FunctionDef, module: Any) -> None:
        code_uri = (self.root / function.code_uri).resolve()
        origin = getattr(module, "__file__", None)
        if origin and not Path(origin).resolve().is_relative_to(code_uri):
            log.warning(
                "%s: %s was imported from %s, not from CodeUri %s (stale install?)",
                function.logical_id,
                function.module,
                origin,
                code_uri,
            )

    def invoke(self, name: str, event: Any) -> Invocation:
        _invoking.function = name
        try:
            return self._invoke(name, event)
        finally:
            _invoking.function = None

    def _invoke(self, name: str, event: Any) -> Invocation:
        function = self.functions[name]
        request_id = str(uuid.uuid4())
        started = time.perf_counter()
        try:
            handler = self._handler(name)
            result = handler(event, LambdaContext(function, request_id))
        except _ImportFailure as failure:
            log.error("%s: %s", name, failure.error["errorMessage"])
            return Invocation(name, request_id, None, failure.error, _elapsed(started))
        except Exception as exc:
            log.error("%s raised %s: %s", name, type(exc).__name__, exc, exc_info=exc)
            error = {
                "errorMessage": str(exc),
                "errorType": type(exc).__name__,
                "requestId": request_id,
                "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
            }
            return Invocation(name, request_id, None, error, _elapsed(started))
        try:
            json.dumps(result)  # Lambda serializes the result: the same types must be returned locally
        except (TypeError, ValueError) as exc:
            error = {
                "errorMessage": f"Unable to marshal response: {exc}",
                "errorType": "Runtime.MarshalError",
                "requestId": request_id,
                "stackTrace": [],
            }
            log.error("%s: %s", name, error["errorMessage"])
            return Invocation(name, request_id, None, error, _elapsed(started))
        duration = _elapsed(started)
        if duration > function.timeout * 1000:
            log.warning(
                "%s took %.0f ms: Lambda would have stopped it at its Timeout of %d s",
                name,
                duration,
                function.timeout,
            )
        return Invocation(name, request_id, result, None, duration)


class _ImportFailure(Exception):
    def __init__(self, error_type: str, message: str, cause: Exception | None) -> None:
        super().__init__(message)
        stack = traceback.format_list(traceback.extract_tb(cause.__traceback__)) if cause else []
        self.error: dict[str, Any] = {"errorMessage": message, "errorType": error_type, "stackTrace": stack}


def _elapsed(started: float) -> float:
    return (time.perf_counter() - started) * 1000


# what every Powertools record repeats (the Lambda context, the service): left out of the readable line
_BOILERPLATE = frozenset(
    {
        "level",
        "location",
        "message",
        "timestamp",
        "service",
        "cold_start",
        "function_name",
        "function_memory_size",
        "function_arn",
        "function_request_id",
        "correlation_id",
        "xray_trace_id",
        "sampling_rate",
        "exception",
        "exception_name",
        "stack_trace",
    }
)


# The function this thread invokes. The handlers share one Powertools logger here (one process, one module), so
# the record's function_name is whichever handler's context was injected last, by any thread.
_invoking = threading.local()


def readable_line(log: Mapping[str, Any]) -> str:
    """A Powertools record as one line: time, level, function, message and its own keys (``outcome=stored``)."""
    stamp = str(log.get("timestamp", ""))[11:19]
    keys = " ".join(
        f"{key}={_short(value)}" for key, value in log.items() if key not in _BOILERPLATE and value not in (None, "")
    )
    function = getattr(_invoking, "function", None) or log.get("function_name", "dfd")
    line = f"{stamp} {log.get('level', '')!s:<7} {function!s:<16} {log.get('message', '')}"
    line = f"{line}  {keys}" if keys else line
    if log.get("exception"):
        line += "\n" + str(log["exception"])
    return line


def _short(value: object, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def readable_powertools_lines() -> None:
    """The handlers' Powertools loggers write readable lines instead of JSON: their formatter keeps building the
    structured record (keys appended by the handlers included), only its last step, the JSON serializer, is
    replaced; and the record stops there (the root logger would print it a second time)."""
    for candidate in list(logging.Logger.manager.loggerDict.values()):
        if not isinstance(candidate, logging.Logger):
            continue
        for handler in candidate.handlers:
            formatter = handler.formatter
            if formatter is not None and hasattr(formatter, "json_serializer"):
                formatter.json_serializer = readable_line
                candidate.propagate = False
