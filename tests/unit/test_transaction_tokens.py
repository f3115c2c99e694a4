"""A TransactWriteItems call's ClientRequestToken is its own (dfd.adapters.dynamo.base.transact): DynamoDB answers a
token it saw in the last 10 minutes with that call's result, unapplied, so two calls with identical items (the same
operation again within one second: same ids, same timestamps) must not share one; botocore's retries of one call
resend its request, token included."""

from __future__ import annotations

from typing import Any

from dfd.adapters.dynamo.base import transact


class _Recording:
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        self.tokens.append(request["ClientRequestToken"])
        return {}


def test_two_calls_with_identical_items_carry_tokens_of_their_own() -> None:
    items = [
        {"Update": {"TableName": "uploads", "Key": {"upload_id": {"S": "1" * 32}}, "UpdateExpression": "SET a = :a"}}
    ]
    client = _Recording()
    transact(client, items)
    transact(client, list(items))
    first, second = client.tokens
    assert first != second
    assert all(0 < len(token) <= 36 for token in client.tokens)  # DynamoDB's limit for the token
