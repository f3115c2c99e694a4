"""The counters' history (dfd.history): the shards read whole, the snapshot written to every series in one
BatchWriteItem, the series read by Query."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import Item, Store, from_item, to_attr, to_item, translate
from dfd.core import codec as core_codec
from dfd.core.config import ConfigError
from dfd.core.errors import ServiceUnavailable
from dfd.core.retry import PARTIAL_ATTEMPTS
from dfd.history import codec as history_codec

if TYPE_CHECKING:
    from dfd.core.records import CounterShard
    from dfd.history.ports import HistoryPoint, Snapshot, TenantTotals


class Snapshots(Store):
    def _history_table(self) -> str:
        if not self._s.history_table:
            raise ConfigError("environment variable STATS_HISTORY_TABLE is required")
        return self._s.history_table

    def counter_shards(self, *, consistent: bool = False) -> dict[str, CounterShard]:
        keys = [to_item({"counter_id": shard}) for shard in self._s.shard_ids]
        found = self._batch_get({self._s.counters_table: {"Keys": keys, "ConsistentRead": consistent}})
        return {str(item["counter_id"]): core_codec.counter_shard(item) for item in found[self._s.counters_table]}

    def put_snapshot(self, snapshot: Snapshot) -> None:
        table = self._history_table()
        pending: dict[str, Any] = {
            table: [{"PutRequest": {"Item": to_item(item)}} for item in history_codec.snapshot_items(snapshot)]
        }
        for attempt in range(1, PARTIAL_ATTEMPTS + 1):
            try:
                response = self._db.batch_write_item(RequestItems=pending)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "BatchWriteItem") from error
            pending = response.get("UnprocessedItems") or {}
            if not pending:
                return
            if attempt < PARTIAL_ATTEMPTS:
                self._backoff(attempt)
        raise ServiceUnavailable("DynamoDB BatchWriteItem left items unprocessed after retries")

    def _query(self, **kwargs: Any) -> list[Item]:
        items: list[Item] = []
        request = {"TableName": self._history_table(), **kwargs}
        while True:
            try:
                response = self._db.query(**request)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "Query") from error
            items += [from_item(item) for item in response.get("Items", [])]
            last = response.get("LastEvaluatedKey")
            if not last or kwargs.get("Limit"):
                return items
            request["ExclusiveStartKey"] = last

    def history(self, step: int, start: int, end: int) -> list[HistoryPoint]:
        query: dict[str, Any] = {
            "KeyConditionExpression": "series = :series AND #at BETWEEN :start AND :last",
            "ExpressionAttributeValues": {
                ":series": to_attr(history_codec.series(step)),
                ":start": to_attr(start),
                ":last": to_attr(end - 1),
            },
        }
        items = self._query(
            **query,
            ExpressionAttributeNames={"#at": "at", "#t": history_codec.PACKED},
            ProjectionExpression="#t",
        )
        if any(history_codec.PACKED not in item for item in items):  # points written before `t`: read them whole
            items = self._query(**query, ExpressionAttributeNames={"#at": "at"})
        return [history_codec.history_point(item, step) for item in items]

    def latest_snapshot(self) -> Snapshot | None:
        try:
            response = self._db.get_item(
                TableName=self._history_table(), Key=to_item(history_codec.LATEST_KEY), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetItem") from error
        return history_codec.snapshot(from_item(response["Item"])) if "Item" in response else None

    def tenant_totals(self) -> list[TenantTotals]:
        names = {f"#a{index}": name for index, name in enumerate(history_codec.TENANT_VIEW_ATTRS)}
        request: dict[str, Any] = {
            "TableName": self._s.tenant_files_table,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
        }
        items: list[Item] = []
        while True:
            try:
                response = self._db.scan(**request)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "Scan") from error
            items += [from_item(item) for item in response.get("Items", [])]
            last = response.get("LastEvaluatedKey")
            if not last:
                return history_codec.tenant_totals(items)
            request["ExclusiveStartKey"] = last
