"""DynamoDB adapter of the drop zone's copies across invocations (dfd.ingest.ports.CopyStore): items of their own
kind in the Events table, their codec dfd.ingest.codec (`copy#<event key>`). The first item is put only where none
is; every later write is conditioned on the multipart upload the writer read and on no end, so two deliveries
never keep two uploads and a copy completes (or aborts) once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import condition_failed, from_item, to_item, translate
from dfd.core import clock
from dfd.ingest import codec as ingest_codec

if TYPE_CHECKING:
    from dfd.ingest.ports import CopyProgress


class DynamoCopyStore:
    """`ttl_days`: a copy not written for that long expires (an abandoned copy leaves nothing behind)."""

    def __init__(self, client: Any, table: str, ttl_days: int) -> None:
        self._db = client
        self._table = table
        self._ttl = timedelta(days=ttl_days)

    def get_copy(self, event_key: str) -> CopyProgress | None:
        try:
            response = self._db.get_item(
                TableName=self._table, Key=to_item(ingest_codec.copy_key(event_key)), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetItem") from error
        raw = response.get("Item")
        return ingest_codec.copy_progress(from_item(raw)) if raw else None

    def start_copy(self, progress: CopyProgress, now: datetime) -> CopyProgress:
        item = ingest_codec.copy_item(progress, clock.iso(now), self._expiry(now))
        try:
            self._db.put_item(
                TableName=self._table, Item=to_item(item), ConditionExpression="attribute_not_exists(event_key)"
            )
        except ClientError as error:
            if condition_failed(error):
                found = self.get_copy(progress.event_key)
                return found if found is not None else self.start_copy(progress, now)  # expired meanwhile
            raise translate(error, "PutItem") from error
        except BotoCoreError as error:
            raise translate(error, "PutItem") from error
        return self.get_copy(progress.event_key) or progress

    def update_copy(self, progress: CopyProgress, upload_id: str | None, now: datetime) -> bool:
        item = ingest_codec.copy_item(progress, clock.iso(now), self._expiry(now))
        names = {f"#{n}": n for n in (*ingest_codec.COPY_CHANGES, "updated_at", "ttl")}
        values: dict[str, Any] = {f":{n[1:]}": item[n[1:]] for n in names if n[1:] in item}
        sets = [f"{n} = :{n[1:]}" for n in names if n[1:] in item]
        removes = [n for n in names if n[1:] not in item]
        condition = "attribute_exists(event_key) AND attribute_not_exists(ended) AND "
        if upload_id is None:
            condition += "attribute_not_exists(upload_id)"
        else:
            condition += "upload_id = :was"
            values[":was"] = upload_id
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            self._db.update_item(
                TableName=self._table,
                Key=to_item(ingest_codec.copy_key(progress.event_key)),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_item(values),
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise translate(error, "UpdateItem") from error
        except BotoCoreError as error:
            raise translate(error, "UpdateItem") from error
        return True

    def next_copy_run(self, progress: CopyProgress, now: datetime) -> bool:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=to_item(ingest_codec.copy_key(progress.event_key)),
                UpdateExpression="SET #r = :next, updated_at = :t",
                ConditionExpression="attribute_exists(event_key) AND attribute_not_exists(ended) AND #r = :run",
                ExpressionAttributeNames={"#r": "run"},
                ExpressionAttributeValues=to_item(
                    {":run": progress.run, ":next": progress.run + 1, ":t": clock.iso(now)}
                ),
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise translate(error, "UpdateItem") from error
        except BotoCoreError as error:
            raise translate(error, "UpdateItem") from error
        return True

    def _expiry(self, now: datetime) -> int:
        return int((now + self._ttl).timestamp())
