"""The bench emulator's stream adjustment holds on the pinned moto: a table's stream keeps no records (writes
stay cheap however many the earlier rows made), and the writes themselves are untouched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID as ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import StreamShard

from dfdbench.emulator import _keep_no_stream_records


def _stream_records(table_name: str) -> int:
    """The records the table's stream holds, as moto keeps them (what the adjustment patches)."""
    shard = dynamodb_backends[ACCOUNT_ID]["us-east-1"].get_table(table_name).stream_shard
    return len(shard.items)


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        yield client


def test_moto_records_stream_changes_without_the_adjustment(ddb: Any) -> None:
    ddb.put_item(TableName="t", Item={"k": {"S": "a"}})
    assert _stream_records("t") == 1


def test_with_the_adjustment_a_stream_keeps_no_records_and_writes_still_land(
    ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(StreamShard, "add", StreamShard.add)  # restored after the test: the patch is global
    _keep_no_stream_records()
    ddb.put_item(TableName="t", Item={"k": {"S": "a"}})
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": {"k": {"S": "b"}}}}])
    assert _stream_records("t") == 0
    assert ddb.scan(TableName="t")["Count"] == 2
