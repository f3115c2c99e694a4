"""schemathesis fuzzes the local stack from docs/openapi.yaml, as a normal user and as an admin.

Every operation of the document gets valid and invalid requests (examples, coverage and fuzzing phases; positive
and negative data), then the stateful phase follows the document's links (an upload's id to its metadata,
download, parts, completion and deletion; a token's id to its revocation; a lock's id to its unlock), and every
answer must pass the checks below: never a 5xx, only documented statuses, content types and bodies, invalid data
refused with a 4xx, and no success without a valid token. Each request goes through requests, so the e2e
response check (tests/e2e/openapi_check.py) sees it too.

The seed moves with the code: it is derived from the commit under test (``git rev-parse HEAD``; a fixed one
without git), so each commit asks new questions, and a failure names the seed that replays it exactly:
``DFD_FUZZ_SEED=<seed> pytest tests/e2e/test_fuzz.py``. ``DFD_FUZZ_EXAMPLES`` and ``DFD_FUZZ_STEPS`` dig deeper by
hand (minutes).

The callers are users of their own (``fuzz`` in tenant ``fuzz``, ``fuzz-admin`` in ``admins``, a personal
tenant), made here: the pending uploads and deletes the fuzzer asks for touch no tenant the other e2e tests count.

Bounded for CI (about 3 minutes on the shared 2-core box, measured in docs/performance.md's sense: by hand, not
asserted). Nothing is excluded: the presigned S3 requests the API hands out are not part of the document, so the
fuzzer never sends bytes to S3.

What the seeds found, all of which hold:
- a malformed multipart upload id is 400 invalid_id; every route refuses a query parameter it does not take (400
  unknown_parameter); POST /upload's size limit is a 400 (too_large) like its other field checks; the LFS batch
  request's optional fields (transfers, ref, hash_algo) are of the spec's type or a 422 (null included); GET
  /lfs/{repo}/locks checks limit and cursor even when a path or id filter is given. POST /upload's part_size, like
  its content_type and sha256, may be null (the service's layout), and the document says so.
- random seeds, both callers at once, from outside: concurrent HTTP API events on the local runtime each see their
  own request (Powertools keeps the event being resolved in a class attribute: the runtime makes it per thread);
  every /lfs route checks its path parameters (repo, upload id, lock id: 404) before its credentials and anything
  else, and every LFS field is checked in one place (dfd.lfs.request: 422): ``ref`` an object on every route, a
  lock id 64 hex, ``limit`` an integer in the body and digits in the query; the document says so.
- 1735012375 (commit 676a301): ``GET /lfs/{repo}/locks?tenant=`` (empty) and ``POST .../locks/verify`` with
  ``"cursor": ""`` answered 200 against the document's patterns: an empty tenant or limit is a 422, an empty
  cursor is the first page and the document says so.
- 1048715133 and 1756118883 (schemathesis from outside, user and admin at once, after the fixes above): the
  unlock body's ``"tenant": null`` was taken as absent; it is a 422 (a tenant is a string when given).
- 2379411282 and 1544428166, then 507322013 and 2287813764 (from outside, 240 s per caller, user and admin at
  once; 15,222 cases): nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from tests.e2e.e2e_helpers import ROOT, RunningStack
from tests.e2e.openapi_check import DOCUMENT

pytestmark = pytest.mark.e2e

# per operation and generation mode; DFD_FUZZ_EXAMPLES=500 digs deeper by hand (minutes)
FUZZ_EXAMPLES = int(os.environ.get("DFD_FUZZ_EXAMPLES", "20"))
# stateful scenarios per caller, of at most STATEFUL_STEPS calls each
STATEFUL_SCENARIOS = int(os.environ.get("DFD_FUZZ_SCENARIOS", "30"))
STATEFUL_STEPS = int(os.environ.get("DFD_FUZZ_STEPS", "8"))
NO_GIT_SEED = 22
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "ignored_auth",
)
CALLERS = {"fuzz": "tenant-fuzz", "fuzz-admin": "admins"}


def fuzz_seed() -> tuple[int, str]:
    """(the seed, where it came from): DFD_FUZZ_SEED, else the first 8 hex digits of the commit under test (CI
    runs on a clean clone of it), else NO_GIT_SEED."""
    if os.environ.get("DFD_FUZZ_SEED"):
        return int(os.environ["DFD_FUZZ_SEED"]), "DFD_FUZZ_SEED"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
        return int(head[:8], 16), f"commit {head[:12]}"
    except (OSError, subprocess.SubprocessError, ValueError):
        return NO_GIT_SEED, "no git commit"


SEED, SEED_SOURCE = fuzz_seed()


@contextmanager
def replayable() -> Iterator[None]:
    """A failure names the seed that asks the same questions again."""
    try:
        yield
    except BaseException as failure:
        failure.add_note(f"fuzz seed {SEED} ({SEED_SOURCE}): replay with DFD_FUZZ_SEED={SEED}")
        raise


def fuzz_config() -> SchemathesisConfig:
    checks: dict[str, Any] = {"enabled": False} | {name: {"enabled": True} for name in CHECKS}
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "checks": checks,
            # the token is the caller's (its header is set on every call): the fuzzer does not generate one; the
            # ignored_auth check still sends each operation without it and with a forged one
            "generation": {
                "mode": "all",
                "max-examples": FUZZ_EXAMPLES,
                "database": "none",
                "with-security-parameters": False,
            },
            "phases": {"stateful": {"enabled": True}},  # test_stateful: the state machine follows the links
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
    with replayable():
        case.call_and_validate(base_url=stack.api_url, headers=fuzz_callers["fuzz"])


@schema.parametrize()
def test_fuzz_as_admin(case: Any, stack: RunningStack, fuzz_callers: dict[str, dict[str, str]]) -> None:
    with replayable():
        case.call_and_validate(base_url=stack.api_url, headers=fuzz_callers["fuzz-admin"])


@pytest.mark.parametrize("username", list(CALLERS))
def test_stateful(username: str, stack: RunningStack, fuzz_callers: dict[str, dict[str, str]]) -> None:
    """Scenarios of linked calls: what one answer names (an upload id, a token id, a lock id) is what the next
    call asks for, so the operations that need an existing id are reached with one."""
    reached: Counter[tuple[str, int]] = Counter()
    scenarios = [0]

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            scenarios[0] += 1

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": stack.api_url, "headers": fuzz_callers[username]}

        def after_call(self, response: Any, case: Any) -> None:
            reached[case.operation.label, response.status_code] += 1

    # generation only, as schemathesis's own stateful phase: the stack keeps what earlier scenarios made, so a
    # replay (shrinking) meets another state; a failure is reported as found, with its seed
    settings = hypothesis.settings(
        max_examples=STATEFUL_SCENARIOS,
        stateful_step_count=STATEFUL_STEPS,
        phases=[hypothesis.Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    suite = 0
    while scenarios[0] < STATEFUL_SCENARIOS and suite < 5:
        # Hypothesis stops a suite whose choices the stack's state made differ from an earlier scenario's
        # (Flaky, as schemathesis's engine treats it): the next suite goes on with the next seed
        with replayable(), contextlib.suppress(hypothesis.errors.Flaky):
            hypothesis.seed(SEED + suite)(Workflow).run(settings=settings)
        suite += 1
    print(f"stateful, {username}, seed {SEED}: {scenarios[0]} scenarios in {suite} suite(s):", sorted(reached.items()))
