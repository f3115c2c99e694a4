"""schemathesis fuzzes the local stack from docs/openapi.yaml, as a normal user and as an admin.

Every operation of the document gets valid and invalid requests (examples, coverage and fuzzing phases; positive
and negative data) and every answer must pass the checks below: never a 5xx, only documented statuses, content
types and bodies, invalid data refused with a 4xx, and no success without a valid token. Each request goes
through requests, so the e2e response check (tests/e2e/openapi_check.py) sees it too.

The callers are users of their own (``fuzz`` in tenant ``fuzz``, ``fuzz-admin`` in ``admins``, a personal
tenant), made here: the pending uploads and deletes the fuzzer asks for touch no tenant the other e2e tests count.

Bounded: FUZZ_EXAMPLES examples per operation and generation mode; both callers over the 11 operations take 1 to
2 minutes on the shared 2-core box (the budget is 3). Nothing is excluded: the presigned S3 requests the API
hands out are not part of the document, so the fuzzer never sends bytes to S3. What it found was fixed in the code:
a malformed multipart upload id is 400 invalid_id; every route refuses a query parameter it does not take (400
unknown_parameter); POST /upload's size limit is a 400 (too_large) like its other field checks; the LFS batch
request's optional fields (transfers, ref, hash_algo) are of the spec's type or a 422 (null included); GET
/lfs/{repo}/locks checks limit and cursor even when a path or id filter is given. POST /upload's part_size, like
its content_type and sha256, may be null (the service's layout), and the document says so.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from tests.e2e.e2e_helpers import RunningStack
from tests.e2e.openapi_check import DOCUMENT

pytestmark = pytest.mark.e2e

# per operation and generation mode; DFD_FUZZ_EXAMPLES=500 digs deeper by hand (minutes)
FUZZ_EXAMPLES = int(os.environ.get("DFD_FUZZ_EXAMPLES", "15"))
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "ignored_auth",
)
CALLERS = {"fuzz": "tenant-fuzz", "fuzz-admin": "admins"}


def fuzz_config() -> SchemathesisConfig:
    checks: dict[str, Any] = {"enabled": False} | {name: {"enabled": True} for name in CHECKS}
    return SchemathesisConfig.from_dict(
        {
            "seed": int(os.environ.get("DFD_FUZZ_SEED", "22")),  # the same requests every run: a failure reproduces
            "checks": checks,
            # the token is the caller's (its header is set on every call): the fuzzer does not generate one; the
            # ignored_auth check still sends each operation without it and with a forged one
            "generation": {
                "mode": "all",
                "max-examples": FUZZ_EXAMPLES,
                "database": "none",
                "with-security-parameters": False,
            },
            "phases": {"stateful": {"enabled": False}},
            "output": {"sanitization": {"enabled": os.environ.get("DFD_FUZZ_SANITIZE", "1") == "1"}},
        }
    )


def make_caller(stack: RunningStack, username: str, group: str) -> None:
    idp = stack.client("cognito-idp")
    pool = stack.cognito["user_pool_id"]
    if group not in {g["GroupName"] for g in idp.list_groups(UserPoolId=pool)["Groups"]}:
        idp.create_group(UserPoolId=pool, GroupName=group)
    idp.admin_create_user(UserPoolId=pool, Username=username, MessageAction="SUPPRESS")
    idp.admin_set_user_password(UserPoolId=pool, Username=username, Password=stack.password, Permanent=True)
    idp.admin_add_user_to_group(UserPoolId=pool, Username=username, GroupName=group)


@pytest.fixture(scope="session")
def fuzz_callers(stack: RunningStack) -> dict[str, dict[str, str]]:
    """username -> its Authorization header."""
    for username, group in CALLERS.items():
        make_caller(stack, username, group)
    return {username: stack.auth(username) for username in CALLERS}


# loaded at import (the operations become the tests' ids); the stack's URL is given per call
schema = schemathesis.openapi.from_path(DOCUMENT, config=fuzz_config())


@schema.parametrize()
def test_fuzz_as_user(case: Any, stack: RunningStack, fuzz_callers: dict[str, dict[str, str]]) -> None:
    case.call_and_validate(base_url=stack.api_url, headers=fuzz_callers["fuzz"])


@schema.parametrize()
def test_fuzz_as_admin(case: Any, stack: RunningStack, fuzz_callers: dict[str, dict[str, str]]) -> None:
    case.call_and_validate(base_url=stack.api_url, headers=fuzz_callers["fuzz-admin"])
