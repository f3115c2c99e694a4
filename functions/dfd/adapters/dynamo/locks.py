"""DynamoDB adapter of Git LFS locks (dfd.lfs.ports.LockStore): the LfsLocks table.

One item kind, its codec dfd.lfs.codec. A lock is created by a conditional put (no item with its key yet)
and deleted conditioned on being the same lock (owner and time), so two writers never both win.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo import from_item, to_item, translate
from dfd.adapters.dynamo.base import condition_failed, conditional_write, get_item
from dfd.core import clock
from dfd.lfs import codec as lfs_codec
from dfd.lfs.ports import Lock, LockExists


class DynamoLockStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def create(self, lock: Lock) -> None:
        try:
            self._db.put_item(
                TableName=self._table,
                Item=to_item(lfs_codec.lock_item(lock)),
                ConditionExpression="attribute_not_exists(lock_id)",
            )
        except ClientError as error:
            if condition_failed(error):
                raise LockExists(self.get(lock.repo_key, lock.lock_id)) from None
            raise translate(error, "PutItem") from error
        except BotoCoreError as error:
            raise translate(error, "PutItem") from error

    def get(self, repo_key: str, lock_id: str) -> Lock | None:
        item = get_item(self._db, self._table, lfs_codec.lock_key(repo_key, lock_id))
        return lfs_codec.lock(item) if item is not None else None

    def page(self, repo_key: str, limit: int, after: str | None) -> tuple[list[Lock], str | None]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "repo_key = :r",
            "ExpressionAttributeValues": to_item({":r": repo_key}),
            "ConsistentRead": True,
            "Limit": limit + 1,  # one more than the page: whether there is a next page
        }
        if after:
            request["ExclusiveStartKey"] = to_item(lfs_codec.lock_key(repo_key, after))
        try:
            response = self._db.query(**request)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "Query") from error
        locks = [lfs_codec.lock(from_item(raw)) for raw in response.get("Items", [])]
        if len(locks) > limit:
            return locks[:limit], locks[limit - 1].lock_id
        return locks, None

    def delete(self, lock: Lock) -> bool:
        return conditional_write(
            lambda: self._db.delete_item(
                TableName=self._table,
                Key=to_item(lfs_codec.lock_key(lock.repo_key, lock.lock_id)),
                ConditionExpression="#o = :o AND locked_at = :t",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues=to_item({":o": lock.owner, ":t": clock.iso(lock.locked_at)}),
            ),
            "DeleteItem",
        )
