"""The bench emulator's transactions (dfdbench.emulator.snapshot_touched_items): a cancelled TransactWriteItems
leaves every item it named as it was, a committed one applies, and no table is copied whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from dfdbench.emulator import snapshot_touched_items


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    snapshot_touched_items(monkeypatch.setattr)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        for name, keys in (("plain", [("id", "HASH")]), ("ranged", [("id", "HASH"), ("at", "RANGE")])):
            client.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": a, "KeyType": k} for a, k in keys],
                AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a, _ in keys],
                BillingMode="PAY_PER_REQUEST",
            )
        client.put_item(TableName="plain", Item={"id": {"S": "a"}, "n": {"N": "1"}})
        client.put_item(TableName="plain", Item={"id": {"S": "gone"}, "n": {"N": "7"}})
        client.put_item(TableName="ranged", Item={"id": {"S": "r"}, "at": {"S": "1"}, "n": {"N": "1"}})
        yield client


def _backend() -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends["123456789012"]["us-east-1"]


def _everything(client: Any) -> dict[str, list[dict[str, Any]]]:
    return {name: sorted(client.scan(TableName=name)["Items"], key=repr) for name in ("plain", "ranged")}


def _ops(condition_holds: bool) -> list[dict[str, Any]]:
    bump = {"UpdateExpression": "SET n = n + :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}
    return [
        {"Update": {"TableName": "plain", "Key": {"id": {"S": "a"}}, **bump}},
        {"Put": {"TableName": "plain", "Item": {"id": {"S": "new"}, "n": {"N": "5"}}}},
        {"Delete": {"TableName": "plain", "Key": {"id": {"S": "gone"}}}},
        {"Update": {"TableName": "ranged", "Key": {"id": {"S": "r"}, "at": {"S": "1"}}, **bump}},
        {"Put": {"TableName": "ranged", "Item": {"id": {"S": "r"}, "at": {"S": "2"}}}},
        {
            "ConditionCheck": {
                "TableName": "plain",
                "Key": {"id": {"S": "gone"} if condition_holds else {"S": "absent"}},
                "ConditionExpression": "attribute_exists(id)",
            }
        },
    ]


def test_a_cancelled_transaction_leaves_every_item_as_it_was(ddb: Any) -> None:
    before, tables = _everything(ddb), dict(_backend().tables)
    ops = _ops(condition_holds=False)
    ops[2], ops[5] = ops[5], ops[2]  # the failing check before the delete: every other op has run
    ops[2]["ConditionCheck"]["Key"] = {"id": {"S": "absent"}}
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(TransactItems=ops)
    assert _everything(ddb) == before
    assert all(_backend().tables[name] is table for name, table in tables.items())  # no table swapped for a copy


def test_a_committed_transaction_applies(ddb: Any) -> None:
    ops = _ops(condition_holds=True)
    del ops[2]  # the check and the delete would name one item twice
    ddb.transact_write_items(TransactItems=ops)
    after = _everything(ddb)
    assert {i["id"]["S"]: i["n"]["N"] for i in after["plain"]} == {"a": "2", "new": "5", "gone": "7"}
    assert [(i["at"]["S"], i.get("n", {}).get("N")) for i in after["ranged"]] == [("1", "2"), ("2", None)]
