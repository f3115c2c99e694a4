"""DELETE /uploads/{id} as a given user for integration tests."""

from __future__ import annotations

import json
from typing import Any

from dfd.handlers import uploads
from tests.support import ALICE, ApiUser, LambdaContext, api_event


def delete(upload_id: str, user: ApiUser = ALICE) -> tuple[int, dict[str, Any]]:
    event = api_event("DELETE", f"/uploads/{upload_id}", user=user)
    event["routeKey"] = event["requestContext"]["routeKey"] = "DELETE /uploads/{id}"
    event["pathParameters"] = {"id": upload_id}
    response = uploads.handler(event, LambdaContext())
    body = response.get("body") or ""
    return int(response["statusCode"]), (json.loads(body) if body else {})
