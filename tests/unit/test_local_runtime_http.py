"""The local runtime handles HTTP API events concurrently, each with its own request: Powertools' resolvers keep the
event they resolve in process-wide state (``BaseRouter.current_event`` is a class attribute, the matched route an
app's own), so two at once in one process would read each other's requests — ``GET /lfs/%F0%BC%89%A5/locks`` or
``{"limit": {}}`` answered 200 with another request's path and body. On Lambda
one invocation per process never shares it; the runtime makes that state per thread
(dfdlocal.runtime.isolate_powertools_resolvers)."""

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


def resolver_handler(meet: threading.Barrier | None = None) -> Any:
    app = APIGatewayHttpResolver()

    @app.post("/echo")
    def echo() -> dict[str, Any]:
        time.sleep(0.02)  # another request arrives meanwhile
        return {"body": app.current_event.json_body}

    @app.get("/echo/<word>")
    def echo_path(word: str) -> dict[str, Any]:
        if meet is not None:
            meet.wait()  # every request of the round is inside the resolver at once
        route_word = app.context["_route_args"]["word"]
        return {"body": {"word": word, "path": app.current_event.path, "route_word": route_word}}

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


def test_http_api_invocations_run_in_parallel_each_with_its_route() -> None:
    """Four requests to one function and another are inside their resolvers at the same time (a barrier they all
    wait at: one at a time, it would break), and each answers from its own path and route arguments."""
    meet = threading.Barrier(4, timeout=20)
    runtime = Runtime({}, root=Path("."))
    for name in ("One", "Two"):
        runtime.register(function(name), resolver_handler(meet))
    answers: dict[int, Any] = {}

    def call(index: int) -> None:
        invocation = runtime.invoke("One" if index % 2 else "Two", api_event("GET", f"/echo/w{index}"))
        answers[index] = json.loads(invocation.result["body"])["body"]

    threads = [threading.Thread(target=call, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert answers == {i: {"word": f"w{i}", "path": f"/echo/w{i}", "route_word": f"w{i}"} for i in range(4)}
