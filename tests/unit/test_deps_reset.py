"""deps.reset forgets every cached factory, so a test or the local stack that changes the environment (another
endpoint, another state machine) never reaches a client built for the one before."""

from __future__ import annotations

from typing import Any

import pytest

from dfd import deps
from dfd.adapters import aws


def _cached(module: Any) -> list[Any]:
    return [
        v
        for v in vars(module).values()
        if getattr(v, "__module__", None) == module.__name__ and hasattr(v, "cache_info")
    ]


def test_reset_forgets_every_cached_client_and_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    first = aws.stepfunctions(), aws.s3_complete(), aws.s3()  # lazy: built on first use, cached now
    deps.reset()
    assert [f.__name__ for f in _cached(aws) + _cached(deps) if f.cache_info().currsize] == []
    assert aws.stepfunctions() is not first[0] and aws.s3_complete() is not first[1] and aws.s3() is not first[2]
    deps.reset()
