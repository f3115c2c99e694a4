"""Every API response an e2e test receives is checked against docs/openapi.yaml (openapi-core).

:func:`validating_responses` wraps ``requests.Session.send`` (every ``requests.get/post/...`` goes through it)
while the local stack runs: a response from one of the document's routes that the document does not allow — an
undocumented status, a body or content type off its schema — fails the test that received it, and is kept so
the session fails too should that test have swallowed the error. Requests the document has no route for (the
web pages, /config.js, CORS preflights, S3's presigned URLs) are not checked.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from openapi_core import Config, OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse
from openapi_core.templating.paths.exceptions import PathError

from tests.e2e.e2e_helpers import ROOT

DOCUMENT = ROOT / "docs" / "openapi.yaml"


@cache
def load_document(path: Path = DOCUMENT) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def document_for(base_url: str) -> dict[str, Any]:
    """The document with the running API as its one server."""
    document = copy.deepcopy(load_document())
    document["servers"] = [{"url": base_url.rstrip("/")}]
    return document


class ResponseChecker:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        # git-lfs's media type is JSON (the /lfs routes): read as such
        config = Config(extra_media_type_deserializers={"application/vnd.git-lfs+json": json.loads})
        self.openapi = OpenAPI.from_dict(document_for(base_url), config=config)
        self.failures: list[str] = []
        self.checked = 0

    def check(self, response: requests.Response) -> None:
        if not response.url.startswith(self.base_url + "/"):
            return
        request = RequestsOpenAPIRequest(response.request)
        try:
            self.openapi.validate_response(request, RequestsOpenAPIResponse(response))
        except PathError:
            return  # not an API route (a page, a preflight, a path no route matches)
        except Exception as error:  # every openapi-core validation error
            reason = getattr(error, "__cause__", None) or error
            failure = (
                f"{response.request.method} {response.url} -> {response.status_code} breaks docs/openapi.yaml: "
                f"{type(error).__name__}: {reason}\nbody: {response.text[:500]}"
            )
            self.failures.append(failure)
            raise AssertionError(failure) from error
        self.checked += 1


@contextmanager
def validating_responses(base_url: str) -> Iterator[ResponseChecker]:
    """Check every response of the API at ``base_url`` while the context is open."""
    checker = ResponseChecker(base_url)
    original = requests.Session.send

    def send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        response = original(self, request, **kwargs)
        checker.check(response)
        return response

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(requests.Session, "send", send)
        yield checker
