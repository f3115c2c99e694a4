"""DynamoDB adapter of a user's S3 sessions record (dfd.identity.ports.S3SessionStore): one item of the LfsTokens
table, ``s3sessions#<sub>`` (its codec: dfd.identity.codec), read consistently and replaced whole with a condition on
the version read, so two concurrent issues never both pass the limit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dfd.adapters.dynamo import to_item
from dfd.adapters.dynamo.base import conditional_write, get_item
from dfd.core import clock
from dfd.identity import codec as identity_codec
from dfd.identity.s3sessions import KEEP_SECONDS

if TYPE_CHECKING:
    from dfd.identity.ports import S3Session


class DynamoS3SessionStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def sessions(self, owner: str) -> tuple[list[S3Session], int]:
        return identity_codec.sessions(get_item(self._db, self._table, identity_codec.sessions_key(owner)))

    def replace(self, owner: str, sessions: list[S3Session], version: int) -> bool:
        last = max((session.expires_at for session in sessions), default=clock.now())
        item = identity_codec.sessions_item(owner, sessions, version + 1, clock.plus(last, seconds=KEEP_SECONDS))
        condition = "attribute_not_exists(#v)" if version == 0 else "#v = :v"
        request: dict[str, Any] = {
            "TableName": self._table,
            "Item": to_item(item),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#v": "version"},
        }
        if version:
            request["ExpressionAttributeValues"] = {":v": {"N": str(version)}}
        return conditional_write(lambda: self._db.put_item(**request), "PutItem")
