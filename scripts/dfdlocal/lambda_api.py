"""Lambda's Invoke API for the template's functions (the ``sam local start-lambda`` convention).

``POST /2015-03-31/functions/<name>/invocations`` with a JSON payload; ``<name>`` is the logical id, an ARN
or ``name:qualifier``. ``X-Amz-Invocation-Type``: RequestResponse (default) -> 200 with the result, or with
``X-Amz-Function-Error: Unhandled`` and Lambda's error document when the function raised; Event -> 202 and
the function runs in the background; DryRun -> 204. Unknown function -> 404 ResourceNotFoundException.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from werkzeug.wrappers import Request, Response

from dfdlocal.names import ACCOUNT_ID, REGION
from dfdlocal.runtime import Runtime

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger("dfdlocal.lambda")

INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations/?$")
MAX_SYNC_PAYLOAD_BYTES = 6 * 1024 * 1024
MAX_ASYNC_PAYLOAD_BYTES = 256 * 1024


def error_response(status: int, error_type: str, message: str) -> Response:
    response = Response(
        json.dumps({"Type": "User", "message": message, "__type": error_type}),
        status=status,
        content_type="application/json",
    )
    response.headers["x-amzn-errortype"] = error_type
    return response


class LambdaApi:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return self.dispatch(Request(environ))(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        match = INVOKE_PATH.match(request.path)
        if match is None:
            return error_response(404, "UnknownOperationException", f"Unknown operation {request.path}")
        if request.method != "POST":
            return error_response(405, "MethodNotAllowed", "Invoke is POST")
        requested = unquote(match.group("name"))
        name = self.runtime.resolve(requested)
        if name is None:
            arn = (
                requested
                if requested.startswith("arn:")
                else (f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{requested}")
            )
            log.info("invoke %s -> 404 (functions: %s)", requested, ", ".join(self.runtime.functions))
            return error_response(404, "ResourceNotFoundException", f"Function not found: {arn}")

        invocation_type = request.headers.get("x-amz-invocation-type", "RequestResponse")
        limit = MAX_ASYNC_PAYLOAD_BYTES if invocation_type == "Event" else MAX_SYNC_PAYLOAD_BYTES
        raw = request.get_data(cache=False)
        if len(raw) > limit:
            return error_response(
                413, "RequestTooLargeException", f"Request must be smaller than {limit} bytes for the Invoke operation"
            )
        try:
            event: Any = json.loads(raw) if raw.strip() else {}
        except RecursionError:
            return error_response(400, "InvalidRequestContentException", "Could not parse request body into json")
        except ValueError as exc:
            return error_response(
                400, "InvalidRequestContentException", f"Could not parse request body into json: {exc}"
            )

        if invocation_type == "DryRun":
            return Response(status=204)
        if invocation_type == "Event":
            threading.Thread(target=self._invoke_async, args=(name, event), name=f"invoke-{name}", daemon=True).start()
            response = Response(status=202)
            response.headers["x-amzn-requestid"] = "async"
            return response
        if invocation_type != "RequestResponse":
            return error_response(
                400, "InvalidParameterValueException", f"Unsupported invocation type {invocation_type}"
            )

        invocation = self.runtime.invoke(name, event)
        # the reconcile workflow invokes its function a dozen times a run, every minute: successes at DEBUG
        log.log(
            logging.DEBUG if invocation.ok else logging.WARNING,
            "invoke %s -> %s (%.0f ms)",
            name,
            "ok" if invocation.ok else f"error {invocation.error and invocation.error.get('errorType')}",
            invocation.duration_ms,
        )
        response = Response(invocation.payload(), status=200, content_type="application/json")
        response.headers["x-amzn-requestid"] = invocation.request_id
        response.headers["x-amz-executed-version"] = "$LATEST"
        if not invocation.ok:
            response.headers["x-amz-function-error"] = "Unhandled"
        return response

    def _invoke_async(self, name: str, event: Any) -> None:
        invocation = self.runtime.invoke(name, event)
        log.info("invoke %s (Event) -> %s (%.0f ms)", name, "ok" if invocation.ok else "error", invocation.duration_ms)
