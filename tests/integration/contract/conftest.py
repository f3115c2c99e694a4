"""The storage contract, one suite per aggregate in this folder, each run against the three implementations: the
in-memory FakeRepository the unit tests use (tests/unit/fakes/) and the DynamoDB adapter, on moto and on AWS's
DynamoDB Local (the engine of make run and the e2e stacks). Every condition — replays, races, quota refusals,
delete and resurrection transitions, multipart records — must give the same records and the same typed conflicts,
carrying the same records, so the fake cannot drift from the adapter.

A lost response (the write applied, its answer lost, retried) only exists on the wire: tests/integration/
test_lost_responses.py proves the adapter's handling of it end to end.
"""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from dfd.adapters.dynamo import Repository as DynamoRepository
from dfd.core.config import Settings
from tests.integration.contract.support import (
    Repository,
    _limits,
)
from tests.unit.fakes import FakeRepository


@pytest.fixture(params=["fake", "dynamo", "dynamodb-local"])
def repo(request: pytest.FixtureRequest) -> Iterator[Repository]:
    if request.param == "fake":
        base = Settings.from_env()
        yield FakeRepository(_limits(base))
        return
    if request.param == "dynamodb-local":  # AWS's own emulator: the engine make run and the e2e stacks use
        client, settings = request.getfixturevalue("local_dynamodb")
        yield DynamoRepository(client, _limits(settings))
        return
    aws = request.getfixturevalue("aws")
    yield DynamoRepository(boto3.client("dynamodb"), _limits(aws.settings))
