"""The reconcile's lease (dfd.reconcile.service): one item, `lease#reconcile` in the counters table, taken and renewed
by conditional writes with an expiry, so two runs never overlap and a run that dies frees it by expiring."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import Store, condition_failed, from_item, refused_item, to_attr, to_item, translate
from dfd.core import clock
from dfd.core.conflicts import LeaseLost
from dfd.reconcile import codec as reconcile_codec

if TYPE_CHECKING:
    from dfd.core.records import Lease


class Leases(Store):
    def take_lease(self, holder: str, now: datetime, until: datetime) -> Lease:
        try:
            answer = self._db.update_item(
                TableName=self._s.counters_table,
                Key=to_item(reconcile_codec.lease_key()),
                UpdateExpression="SET holder = :me, expires_at = :until",
                ConditionExpression="attribute_not_exists(holder) OR holder = :me OR expires_at < :now",
                ExpressionAttributeValues={
                    ":me": to_attr(holder),
                    ":until": to_attr(clock.iso(until)),
                    ":now": to_attr(clock.iso(now)),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as error:
            if condition_failed(error):
                return reconcile_codec.lease(refused_item(error))
            raise translate(error, "UpdateItem") from error
        return reconcile_codec.lease(from_item(answer["Attributes"]))

    def renew_lease(self, holder: str, until: datetime) -> None:
        try:
            self._db.update_item(
                TableName=self._s.counters_table,
                Key=to_item(reconcile_codec.lease_key()),
                UpdateExpression="SET expires_at = :until",
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":me": to_attr(holder), ":until": to_attr(clock.iso(until))},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as error:
            if condition_failed(error):
                raise LeaseLost(reconcile_codec.lease(refused_item(error))) from error
            raise translate(error, "UpdateItem") from error

    def note_sweep_due(self, now: datetime) -> None:
        try:
            self._db.update_item(
                TableName=self._s.counters_table,
                Key=to_item(reconcile_codec.lease_key()),
                UpdateExpression="SET sweep_due_at = :now",
                ExpressionAttributeValues={":now": to_attr(clock.iso(now))},
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "UpdateItem") from error

    def release_lease(self, holder: str, *, swept_at: datetime | None = None) -> None:
        update = "REMOVE holder, expires_at" + (" SET swept_at = :swept" if swept_at else "")
        values = {":me": to_attr(holder)} | ({":swept": to_attr(clock.iso(swept_at))} if swept_at else {})
        try:
            self._db.update_item(
                TableName=self._s.counters_table,
                Key=to_item(reconcile_codec.lease_key()),
                UpdateExpression=update,
                ConditionExpression="holder = :me",
                ExpressionAttributeValues=values,
            )
        except (ClientError, BotoCoreError) as error:
            if not condition_failed(error):  # not ours any more: nothing to free
                raise translate(error, "UpdateItem") from error
