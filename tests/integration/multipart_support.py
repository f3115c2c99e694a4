"""Multipart uploads through the handlers for integration tests: the caller's claims, the routes, the parts."""

from __future__ import annotations

from typing import Any

import requests

from dfd.config import MIB
from dfd.handlers import multipart as parts_handler
from dfd.handlers import upload
from tests import support
from tests.support import api_event, call

ALICE = support.ALICE.claims()
PART = 5 * MIB
DATA = (b"multipart!" * (PART // 10 + 1))[:PART] * 2 + b"tail" * 1000  # parts: 5 MiB, 5 MiB, 4,000 bytes


def as_user(event: dict[str, Any], claims: dict[str, str]) -> dict[str, Any]:
    """The event as API Gateway's JWT authorizer passes it for a user with these claims."""
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def route(method: str, upload_id: str, action: str, claims: dict[str, str], body: Any = None) -> tuple[int, Any]:
    event = as_user(api_event(method, f"/uploads/{upload_id}/{action}", body=body), claims)
    event["routeKey"] = f"{method} /uploads/{{id}}/{action}"
    event["pathParameters"] = {"id": upload_id}
    return call(parts_handler.handler, event)


def create(size: int = len(DATA), claims: dict[str, str] = ALICE, **extra: Any) -> dict[str, Any]:
    body = {"filename": "big.bin", "size": size, "multipart": True, **extra}
    status, answer = call(upload.handler, as_user(api_event("POST", "/upload", body=body), claims))
    assert status == 201, answer
    return answer


def put_parts(answer: dict[str, Any], numbers: list[int], data: bytes = DATA, part_size: int = PART) -> dict[int, str]:
    etags = {}
    for part in answer["parts"]:
        number = part["part_number"]
        if number not in numbers:
            continue
        chunk = data[(number - 1) * part_size : number * part_size]
        response = requests.put(part["url"], data=chunk, headers=part["headers"], timeout=10)
        assert response.status_code == 200, response.text
        etags[number] = response.headers["ETag"]
    return etags
