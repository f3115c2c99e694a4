"""DynamoDB adapter of the hashing states (dfd.ingest.ports.HashingStore): items of their own kind in the Events
table, their codec dfd.ingest.codec (`hashing#<event key>`). The first state is put only where none is; every later
one replaces it conditioned on the bytes the writer started from, so two runs of one segment never both move it.
After each state that lands, the object key's progress item (`hashing-key#<bucket>/<key>`, what GET /metadata
reads) is put too: display only, one more write a segment.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import condition_failed, conditional_write, get_item, to_item, translate
from dfd.core import clock
from dfd.ingest import codec as ingest_codec

if TYPE_CHECKING:
    from dfd.ingest.ports import HashingShown, HashProgress


class DynamoHashingStore:
    """`ttl_days`: a state not written for that long expires (an abandoned hashing leaves nothing behind)."""

    def __init__(self, client: Any, table: str, ttl_days: int) -> None:
        self._db = client
        self._table = table
        self._ttl = timedelta(days=ttl_days)

    def get_hashing(self, event_key: str) -> HashProgress | None:
        item = get_item(self._db, self._table, ingest_codec.hashing_key(event_key))
        return ingest_codec.hash_progress(item) if item is not None else None

    def start_hashing(self, progress: HashProgress, now: datetime) -> HashProgress:
        try:
            self._db.put_item(
                TableName=self._table,
                Item=to_item(self._item(progress, now)),
                ConditionExpression="attribute_not_exists(event_key)",
            )
        except ClientError as error:
            if condition_failed(error):
                found = self.get_hashing(progress.event_key)
                if found is not None:
                    return found
                return self.start_hashing(progress, now)  # expired between the put and the read
            raise translate(error, "PutItem") from error
        except BotoCoreError as error:
            raise translate(error, "PutItem") from error
        self._show(progress, now)
        return self.get_hashing(progress.event_key) or progress

    def advance_hashing(self, progress: HashProgress, from_length: int, now: datetime) -> bool:
        put = conditional_write(
            lambda: self._db.put_item(
                TableName=self._table,
                Item=to_item(self._item(progress, now)),
                ConditionExpression="hashed = :from AND attribute_not_exists(digest)",
                ExpressionAttributeValues=to_item({":from": from_length}),
            ),
            "PutItem",
        )
        if not put:
            return False
        self._show(progress, now)
        return True

    def next_run(self, progress: HashProgress, now: datetime) -> bool:
        return conditional_write(
            lambda: self._db.update_item(
                TableName=self._table,
                Key=to_item(ingest_codec.hashing_key(progress.event_key)),
                UpdateExpression="SET #r = :next, updated_at = :t",
                ConditionExpression="attribute_exists(event_key) AND attribute_not_exists(digest) AND #r = :run",
                ExpressionAttributeNames={"#r": "run"},
                ExpressionAttributeValues=to_item(
                    {":run": progress.run, ":next": progress.run + 1, ":t": clock.iso(now)}
                ),
            ),
            "UpdateItem",
        )

    def hashing_of_key(self, bucket: str, key: str) -> HashingShown | None:
        item = get_item(self._db, self._table, ingest_codec.progress_key(bucket, key), consistent=False)
        return ingest_codec.hashing_shown(item) if item is not None else None

    def _show(self, progress: HashProgress, now: datetime) -> None:
        item = ingest_codec.progress_item(progress, clock.iso(now), int((now + self._ttl).timestamp()))
        try:
            self._db.put_item(TableName=self._table, Item=to_item(item))
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "PutItem") from error

    def _item(self, progress: HashProgress, now: datetime) -> dict[str, Any]:
        return ingest_codec.hashing_item(progress, clock.iso(now), int((now + self._ttl).timestamp()))
