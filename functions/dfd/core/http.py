"""The HTTP side shared by every API function: resolver, CORS, and the ONE error → HTTP mapping."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

# From its modules, not the package: the package's __init__ (every resolver, and asyncio) is deferred by
# dfd.lazyinit, which every function's init imports first (dfd.handlers).
from aws_lambda_powertools.event_handler import content_types
from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver, CORSConfig, Response
from aws_lambda_powertools.logging import correlation_paths

from dfd.core.config import settings
from dfd.core.errors import BadRequest, DfdError, NotFound
from dfd.core.headers import API_SECURITY_HEADERS
from dfd.core.observability import logger, tracer
from dfd.core.text import echo, echo_list

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.typing import LambdaContext


LOGGED_MESSAGE_CHARS = 512


def json_response(status: int, body: Any) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, separators=(",", ":")),
        headers={"Cache-Control": "no-store"},
    )


CSV = "text/csv"


def csv_response(body: str) -> Response[str]:
    return Response(
        status_code=200,
        content_type=f"{CSV}; charset=utf-8",
        body=body,
        headers={"Cache-Control": "no-store"},
    )


def wants_csv(app: APIGatewayHttpResolver) -> bool:
    """The request's Accept header prefers text/csv to JSON (absent or anything else: JSON)."""
    raw = app.current_event.headers.get("accept") or ""
    weights: dict[str, float] = {}
    for part in raw[:1024].split(","):
        kind, *params = (piece.strip() for piece in part.split(";"))
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights[kind.lower()] = max(weight, weights.get(kind.lower(), 0.0))
    json_weight = max(
        weights.get(content_types.APPLICATION_JSON, 0.0), weights.get("application/*", 0.0), weights.get("*/*", 0.0)
    )
    return weights.get(CSV, 0.0) > 0 and weights[CSV] >= json_weight


def error_response(error: DfdError) -> Response[str]:
    response = json_response(error.status, error.to_body())
    if isinstance(error.details, dict) and "retry_after" in error.details:
        response.headers["Retry-After"] = str(error.details["retry_after"])
    return response


def cors_config(origins: tuple[str, ...]) -> CORSConfig:
    """CORS for `origins` (Settings.allowed_origins: validated at init)."""
    return CORSConfig(
        allow_origin=origins[0],
        extra_origins=list(origins[1:]),
        allow_headers=["Content-Type", "Authorization"],
        max_age=600,
    )


def make_app() -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver(cors=cors_config(settings().allowed_origins))

    @app.exception_handler(DfdError)  # type: ignore[untyped-decorator]
    def _domain_error(error: DfdError) -> Response[str]:
        log = logger.warning if error.status < 500 else logger.error
        # the message may quote client input: logged bounded and printable, so the 4xx is always logged
        message = echo(error.message, LOGGED_MESSAGE_CHARS)
        log("request failed", extra={"status": error.status, "code": error.code, "error": message})
        return error_response(error)

    @app.not_found
    def _not_found(_: Exception) -> Response[str]:
        return error_response(NotFound("no such route"))

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def _unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error", extra={"error_type": type(error).__name__})
        return error_response(DfdError("internal error; the request id is in the logs"))

    return app


def path_id(app: APIGatewayHttpResolver, matched: str) -> str:
    """The {id} path parameter exactly as API Gateway decoded it (the resolver's route regex would drop a
    trailing newline, and an id must be validated as sent)."""
    parameters = app.current_event.path_parameters or {}
    return str(parameters.get("id", matched))


def query_values(app: APIGatewayHttpResolver, *names: str) -> tuple[str | None, ...]:
    """The values of the query parameters `names` (None when absent); any other parameter is a 400
    (`unknown_parameter`): a misspelt `limit` must not silently fall back to the default."""
    event = app.current_event
    unknown = sorted(set(event.query_string_parameters or {}) - set(names))
    if unknown:
        shown = echo_list(unknown)
        raise BadRequest(
            f"unknown query parameter(s): {', '.join(shown)}; this route takes {', '.join(names)}",
            code="unknown_parameter",
            details={"parameters": shown},
        )
    return tuple(event.get_query_string_value(name) for name in names)


def json_body(app: APIGatewayHttpResolver) -> Any:
    """The request's JSON body; BadRequest (400) for a missing, non-UTF-8 or non-JSON body."""
    event = app.current_event
    try:
        raw = event.decoded_body
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("request body is not valid UTF-8", code="invalid_json") from None
    if not raw:
        raise BadRequest("request body is required (JSON object)", code="invalid_json")
    try:
        return json.loads(raw)
    except RecursionError:
        raise BadRequest("request body is nested too deeply", code="invalid_json") from None
    except ValueError as error:
        raise BadRequest(f"request body is not valid JSON: {error}", code="invalid_json") from None


def resolve(app: APIGatewayHttpResolver, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The resolver's answer, with the API's security headers (whatever route, error or 404 produced it)."""
    response = app.resolve(event, context)
    headers = response.setdefault("headers", {})
    for name, value in API_SECURITY_HEADERS.items():
        headers.setdefault(name, value)
    return response


def lambda_entry(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], LambdaContext], dict[str, Any]]:
    """The Lambda handler of an HTTP function: correlation id, tracing, then the resolver.

    The response is never recorded in the trace (capture_response=False): its body may carry a presigned URL,
    a bearer credential; errors are still recorded (capture_error)."""

    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return resolve(app, event, context)

    traced: Callable[[dict[str, Any], LambdaContext], dict[str, Any]] = tracer.capture_lambda_handler(
        handler, capture_response=False
    )
    return logger.inject_lambda_context(traced, correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
