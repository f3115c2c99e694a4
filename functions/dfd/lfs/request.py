"""The /lfs routes' requests, checked in one place (git-lfs docs/api/batch.md and locking.md, docs/openapi.yaml).

Every route checks its path parameters first — before the credentials and before anything is read — then its
body or query here, and hands the services typed values:

* path: ``repo`` (1 to 100 of ``A-Z a-z 0-9 . _ -``, not ``.`` or ``..``), the verify link's upload id (32
  lowercase hex), a lock id (the SHA-256 of its path: 64 lowercase hex); anything else is a 404, exactly as a
  repository, upload or lock that does not exist.
* body: a JSON object (``null`` or no body where the route's body is optional); each field the route takes is
  absent or of the spec's type, else 422 naming it; ``null`` is malformed unless the document allows it (git-lfs
  omits what it does not send). Fields a route does not take are ignored: git-lfs adds fields over time.
* ``ref``, on every route that takes one: an object whose ``name``, when given, is a string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dfd.identity.caller import PERSONAL_TENANT_PREFIX, SUBJECT, TENANT_NAME

REPO_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
OID = re.compile(r"[0-9a-f]{64}")
UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
LOCK_ID = OID  # the SHA-256 of the lock's path
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_PATH = 1024


class LfsError(Exception):
    """A refused LFS request: its status, the message git prints, and extra response headers."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


@dataclass(frozen=True, slots=True)
class Page:
    limit: int
    cursor: str | None  # a lock id: the last of the previous page


@dataclass(frozen=True, slots=True)
class LockQuery:
    """GET /locks: at most one lock by ``path`` and/or ``lock_id``, else a page; ``tenant``: an admin's choice."""

    page: Page
    path: str | None = None
    lock_id: str | None = None
    tenant: str | None = None


# ---------------------------------------------------------------------------------------------- path
def repo_name(raw: Any) -> str:
    if not isinstance(raw, str) or not REPO_NAME.fullmatch(raw) or raw in (".", ".."):
        raise LfsError(404, "no such repository: a name is 1 to 100 characters of A-Z a-z 0-9 . _ - (not . or ..)")
    return raw


def upload_id(raw: Any) -> str:
    if not isinstance(raw, str) or not UPLOAD_ID.fullmatch(raw):
        raise LfsError(404, "no upload has this verify link")
    return raw


def lock_id(raw: Any) -> str:
    if not isinstance(raw, str) or not LOCK_ID.fullmatch(raw):
        raise LfsError(404, "no such lock")
    return raw


# ---------------------------------------------------------------------------------------------- body
def body_object(body: Any, *, optional: bool = False) -> Mapping[str, Any]:
    """The body as a JSON object (``{}`` for no body or ``null`` where it is optional); 422 for anything else.
    Its ``ref``, when present, is checked too: every route that takes a body may carry one."""
    if body is None and optional:
        return {}
    if not isinstance(body, Mapping):
        raise LfsError(422, "the request body must be a JSON object")
    if "ref" in body:
        ref = body["ref"]
        if not isinstance(ref, Mapping) or not isinstance(ref.get("name", ""), str):
            raise LfsError(422, 'ref must be an object {"name": <the refspec>}')
    return body


def lock_path(body: Mapping[str, Any]) -> str:
    path = body.get("path")
    if not isinstance(path, str) or not 1 <= len(path) <= MAX_PATH or not path.isprintable():
        raise LfsError(422, f"path must be a file path of 1 to {MAX_PATH} printable characters")
    return path


def force(body: Mapping[str, Any]) -> bool:
    value = body.get("force", False)
    if not isinstance(value, bool):
        raise LfsError(422, "force must be true or false")
    return value


def tenant(raw: Any) -> str:
    """An admin's ``tenant``: a tenant's name, or ``user:<sub>`` for a tenant of one (absent: the caller's)."""
    personal = isinstance(raw, str) and raw.startswith(PERSONAL_TENANT_PREFIX)
    if not isinstance(raw, str) or not (
        SUBJECT.fullmatch(raw.removeprefix(PERSONAL_TENANT_PREFIX)) if personal else TENANT_NAME.fullmatch(raw)
    ):
        raise LfsError(422, "tenant must be a tenant's name ([a-z0-9][a-z0-9-]{0,63}) or user:<sub>")
    return raw


def body_tenant(body: Mapping[str, Any]) -> str | None:
    """The unlock body's ``tenant``, None when absent (null is malformed: git-lfs omits what it does not send)."""
    return tenant(body["tenant"]) if "tenant" in body else None


def body_page(body: Mapping[str, Any]) -> Page:
    """POST /locks/verify's ``limit`` (an integer or null) and ``cursor`` (a string or null; empty: the first
    page)."""
    limit = body.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise LfsError(422, f"limit must be an integer from 1 to {MAX_LIMIT}")
    cursor = body.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise LfsError(422, "cursor must be a string: the next_cursor of the previous page")
    return _page(limit, cursor or None)


def lock_query(
    path: str | None, ident: str | None, cursor: str | None, limit: str | None, who: str | None
) -> LockQuery:
    """GET /locks's query values (strings; None when absent). An empty path, id or cursor is absent (git-lfs
    sends none empty, older clients did); limit and tenant are what the document says or a 422, checked whether
    or not a path or id filter makes them moot: a malformed request is a 422 either way."""
    if limit is not None and not (limit.isascii() and limit.isdigit()):
        raise LfsError(422, f"limit must be an integer from 1 to {MAX_LIMIT}")
    page = _page(None if limit is None else int(limit), cursor or None)
    return LockQuery(page, path or None, ident or None, None if who is None else tenant(who))


def _page(limit: int | None, cursor: str | None) -> Page:
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise LfsError(422, f"limit must be an integer from 1 to {MAX_LIMIT}")
    if cursor is not None and not LOCK_ID.fullmatch(cursor):
        raise LfsError(422, "cursor is not one this server issued")
    return Page(DEFAULT_LIMIT if limit is None else limit, cursor)
