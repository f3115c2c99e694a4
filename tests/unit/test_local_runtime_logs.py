"""make run's readable log lines name the function that logged them, even when invocations run at once.

The handlers share one Powertools logger in the local runtime's process: its ``function_name`` key is whatever
context was injected last, by any thread, so the line takes the function from the invocation of its own thread.
"""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from dfdlocal.runtime import Runtime, readable_line
from dfdlocal.template import FunctionDef


def function(name: str) -> FunctionDef:
    return FunctionDef(name, f"absent.{name}", "functions/", "python3.12", 30, 128, {})


def test_concurrent_invocations_log_under_their_own_function_names() -> None:
    out = io.StringIO()
    shared = Logger(
        service="dfd-runtime-test",
        level="INFO",
        logger_handler=logging.StreamHandler(out),
        logger_formatter=LambdaPowertoolsFormatter(json_serializer=readable_line),
    )
    both_injected = threading.Barrier(2, timeout=5)

    @shared.inject_lambda_context
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        both_injected.wait()  # each context is injected before either logs: the logger holds only the last one
        shared.info(f"logged by {event['who']}")
        return {}

    runtime = Runtime({}, Path("."))
    for name in ("FirstFunction", "SecondFunction"):
        runtime.register(function(name), handler)
    threads = [
        threading.Thread(target=runtime.invoke, args=(name, {"who": name}))
        for name in ("FirstFunction", "SecondFunction")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    lines = sorted(out.getvalue().splitlines())
    assert len(lines) == 2, lines
    for line in lines:  # "23:08:15 INFO    FirstFunction    logged by FirstFunction"
        _, _, named, *_, by = line.split()
        assert named == by, lines
