"""The local runtime handles HTTP API events one at a time: Powertools' resolvers keep the event they resolve in
process-wide state (``BaseRouter.current_event`` is a class attribute), so two at once in one process read each
other's requests — issue 37's fuzzer saw ``GET /lfs/%F0%BC%89%A5/locks`` and ``{"limit": {}}`` answered 200 with
another request's path and body. On Lambda one invocation per process never shares it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from dfdlocal.runtime import Runtime
from dfdlocal.template import FunctionDef
from tests.support import api_event


def function(name: str) -> FunctionDef:
    return FunctionDef(name, f"absent.{name}", "functions/", "python3.12", 30, 128, {})


def resolver_handler() -> Any:
    app = APIGatewayHttpResolver()

    @app.post("/echo")
    def echo() -> dict[str, Any]:
        time.sleep(0.02)  # another request arrives meanwhile
        return {"body": app.current_event.json_body}

    return app.resolve


def test_concurrent_http_api_invocations_each_see_their_own_event() -> None:
    runtime = Runtime({}, root=Path("."))
    for name in ("One", "Two"):  # two functions: the class attribute is shared across apps too
        runtime.register(function(name), resolver_handler())
    answers: dict[int, Any] = {}

    def call(index: int) -> None:
        event = api_event("POST", "/echo", body={"n": index})
        invocation = runtime.invoke("One" if index % 2 else "Two", event)
        answers[index] = json.loads(invocation.result["body"])["body"]["n"]

    threads = [threading.Thread(target=call, args=(index,)) for index in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert answers == {index: index for index in range(12)}
