"""Callers and settings shared by the unit tests of the upload services."""

from __future__ import annotations

from typing import Any

from dfd.core.config import MIB, Settings
from dfd.identity.caller import Caller

ALICE = Caller(owner="alice-sub", tenant="acme", is_admin=False)
CAROL = Caller(owner="carol-sub", tenant="acme", is_admin=False)
BOB = Caller(owner="bob-sub", tenant="globex", is_admin=False)
ADMIN = Caller(owner="admin-sub", tenant="user:admin-sub", is_admin=True)


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "files_table": "f",
        "counters_table": "c",
        "uploads_table": "u",
        "events_table": "e",
        "tenant_files_table": "t",
        "bucket": "b",
        "multipart_min_part": 5 * MIB,
        "multipart_threshold": 10 * MIB,
    }
    return Settings(**{**base, **overrides})
