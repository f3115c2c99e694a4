"""DynamoDB adapter of personal access tokens (dfd.pats.TokenStore): the LfsTokens table.

One item kind, one codec: ``token_id`` (HASH) → owner, username, name, the secret's SHA-256, created_at
and expires_at (ISO-8601) and ``ttl`` (epoch seconds: DynamoDB deletes an expired token's record a day after it
expired; the service refuses it from its expiry on). The sparse-free OwnerIndex (owner, created_at) lists a
user's tokens.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd import clock
from dfd.adapters.dynamo import from_item, to_item, translate
from dfd.adapters.dynamo.base import condition_failed
from dfd.pats import PersonalToken

OWNER_INDEX = "OwnerIndex"
TTL_GRACE_DAYS = 1


class TokenCodec:
    """PersonalToken <-> its item."""

    @staticmethod
    def encode(token: PersonalToken) -> dict[str, Any]:
        return to_item(
            {
                "token_id": token.token_id,
                "owner": token.owner,
                "username": token.username,
                "name": token.name,
                "secret_hash": token.secret_hash,
                "created_at": clock.iso(token.created_at),
                "expires_at": clock.iso(token.expires_at),
                "ttl": clock.epoch(clock.plus(token.expires_at, days=TTL_GRACE_DAYS)),
            }
        )

    @staticmethod
    def decode(raw: dict[str, Any]) -> PersonalToken:
        item = from_item(raw)
        return PersonalToken(
            token_id=str(item["token_id"]),
            owner=str(item["owner"]),
            username=str(item["username"]),
            name=str(item["name"]),
            secret_hash=str(item["secret_hash"]),
            created_at=clock.parse(str(item["created_at"])),
            expires_at=clock.parse(str(item["expires_at"])),
        )


class DynamoTokenStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def put(self, token: PersonalToken) -> None:
        try:
            self._db.put_item(
                TableName=self._table,
                Item=TokenCodec.encode(token),
                ConditionExpression="attribute_not_exists(token_id)",
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "PutItem") from error

    def get(self, token_id: str) -> PersonalToken | None:
        try:
            response = self._db.get_item(
                TableName=self._table, Key=to_item({"token_id": token_id}), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetItem") from error
        raw = response.get("Item")
        return TokenCodec.decode(raw) if raw else None

    def list_for(self, owner: str) -> list[PersonalToken]:
        tokens: list[PersonalToken] = []
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": OWNER_INDEX,
                "KeyConditionExpression": "#o = :o",
                "ExpressionAttributeNames": {"#o": "owner"},
                "ExpressionAttributeValues": to_item({":o": owner}),
            }
            if start:
                request["ExclusiveStartKey"] = start
            try:
                response = self._db.query(**request)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "Query") from error
            tokens.extend(TokenCodec.decode(raw) for raw in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return tokens

    def delete(self, token_id: str, owner: str) -> bool:
        try:
            self._db.delete_item(
                TableName=self._table,
                Key=to_item({"token_id": token_id}),
                ConditionExpression="#o = :o",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues=to_item({":o": owner}),
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise translate(error, "DeleteItem") from error
        except BotoCoreError as error:
            raise translate(error, "DeleteItem") from error
        return True
