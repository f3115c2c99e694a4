"""DynamoDB adapter of personal access tokens (dfd.identity.ports.TokenStore): the LfsTokens table.

Two item kinds (their codec: dfd.identity.codec):

* a token: ``token_id`` (HASH) → owner, username, name, the secret's SHA-256, created_at and expires_at (ISO-8601)
  and ``ttl`` (epoch seconds: DynamoDB deletes an expired token's record a day after it expired; the service
  refuses it from its expiry on). OwnerIndex (owner, created_at) lists a user's tokens.
* a user's count: ``token_id`` = ``count#<sub>`` → ``held``, the set of the user's token ids, and ``seeded`` (the
  set was filled from OwnerIndex once: users with tokens from before the count). It has no owner and no
  created_at, so OwnerIndex never lists it, and no ttl.

A token is added in ONE transaction: the token's Put (conditioned on its id being new) and ``ADD held :id``
conditioned on ``size(held) < limit`` — concurrent adds are serialized on the count item, so no two pass the limit
together (DynamoDB cancels one of two concurrent transactions on one item: TransactionConflict, the domain's to
retry). A token is deleted in one transaction with ``DELETE held :id``. A refused add makes room before it is
refused: an unseeded count is seeded; ids whose token expired or is gone (TTL deletes records without touching
the count) are taken out of the set; then it is tried again.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo import from_item, to_item, translate
from dfd.adapters.dynamo.base import CancelledTransaction, Plan, conditional_write, get_item, transact
from dfd.core.errors import ServiceUnavailable
from dfd.identity import codec as identity_codec

if TYPE_CHECKING:
    from dfd.identity.ports import PersonalToken

OWNER_INDEX = "OwnerIndex"
# an add's rounds: as it is, after seeding the count, after taking stale ids out of it
ADD_ROUNDS = 3
READ_BATCH = 100  # BatchGetItem's keys


class DynamoTokenStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def add(self, token: PersonalToken, limit: int) -> bool:
        for _ in range(ADD_ROUNDS):
            plan = self._add_plan(token, limit)
            try:
                transact(self._db, plan.items)
            except CancelledTransaction as cancelled:
                if plan.applied_before(cancelled):
                    return True  # our own add, applied before its response was lost
                if cancelled.failed(plan.roles["token"]):  # 64 random bits met another token's id
                    raise ServiceUnavailable("a new token's id is taken: try again") from None
                if not self._make_room(token.owner, limit, token.created_at):
                    return False
                continue
            return True
        return False

    def _add_plan(self, token: PersonalToken, limit: int) -> Plan:
        plan = Plan(identity="token")
        plan.add(
            "count",
            {
                "Update": {
                    "TableName": self._table,
                    "Key": to_item(identity_codec.count_key(token.owner)),
                    "UpdateExpression": "ADD #held :id",
                    "ConditionExpression": "attribute_exists(#seeded) AND "
                    "(attribute_not_exists(#held) OR size(#held) < :limit)",
                    "ExpressionAttributeNames": {"#held": "held", "#seeded": "seeded"},
                    "ExpressionAttributeValues": {":id": {"SS": [token.token_id]}, ":limit": {"N": str(limit)}},
                }
            },
        )
        plan.add(
            "token",
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(identity_codec.token_item(token)),
                    "ConditionExpression": "attribute_not_exists(token_id)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        )
        return plan

    def _make_room(self, owner: str, limit: int, now: datetime) -> bool:
        """After a refused add: seed the count or take stale ids out of it; False when the owner holds `limit`
        live tokens (nothing to take out)."""
        seeded, held = identity_codec.count(get_item(self._db, self._table, identity_codec.count_key(owner)))
        if not seeded:
            self._seed(owner, now)
            return True
        if len(held) < limit:
            return True  # a delete made room meanwhile
        stale = held - self._live(held, now)
        if not stale:
            return False
        self._update_count(owner, "DELETE #held :ids", {"#held": "held"}, {":ids": {"SS": sorted(stale)}})
        return True

    def _seed(self, owner: str, now: datetime) -> None:
        """Count the owner's live tokens as OwnerIndex lists them, once (a concurrent seed finds it done)."""
        live = sorted(token.token_id for token in self.list_for(owner) if token.expires_at > now)
        names = {"#seeded": "seeded"}
        values: dict[str, Any] = {":yes": {"BOOL": True}}
        expression = "SET #seeded = :yes"
        if live:
            names["#held"] = "held"
            values[":ids"] = {"SS": live}
            expression += " ADD #held :ids"
        self._update_count(owner, expression, names, values, condition="attribute_not_exists(#seeded)")

    def _update_count(
        self,
        owner: str,
        expression: str,
        names: dict[str, str],
        values: dict[str, Any],
        *,
        condition: str | None = None,
    ) -> bool:
        """One UpdateItem of the owner's count; False when `condition` refused it."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": to_item(identity_codec.count_key(owner)),
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if condition is not None:
            request["ConditionExpression"] = condition
        return conditional_write(lambda: self._db.update_item(**request), "UpdateItem")

    def _live(self, token_ids: set[str], now: datetime) -> set[str]:
        """Those of `token_ids` whose record exists unexpired at `now` (consistent BatchGetItems of 100 keys: one
        for a count at the limit), and those left unprocessed: not known to be stale."""
        ids = sorted(token_ids)
        live: set[str] = set()
        for start in range(0, len(ids), READ_BATCH):
            keys = [to_item({"token_id": token_id}) for token_id in ids[start : start + READ_BATCH]]
            try:
                response = self._db.batch_get_item(RequestItems={self._table: {"Keys": keys, "ConsistentRead": True}})
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "BatchGetItem") from error
            found = (identity_codec.token(from_item(raw)) for raw in response.get("Responses", {}).get(self._table, []))
            live |= {token.token_id for token in found if token.expires_at > now}
            unprocessed = response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
            live |= {str(from_item(key)["token_id"]) for key in unprocessed}
        return live

    def get(self, token_id: str) -> PersonalToken | None:
        item = get_item(self._db, self._table, {"token_id": token_id})
        return identity_codec.token(item) if item is not None else None

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
            tokens.extend(identity_codec.token(from_item(raw)) for raw in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return tokens

    def delete(self, token_id: str, owner: str) -> bool:
        items: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": to_item({"token_id": token_id}),
                    "ConditionExpression": "#o = :o",
                    "ExpressionAttributeNames": {"#o": "owner"},
                    "ExpressionAttributeValues": to_item({":o": owner}),
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": to_item(identity_codec.count_key(owner)),
                    "UpdateExpression": "DELETE #held :id",
                    "ExpressionAttributeNames": {"#held": "held"},
                    "ExpressionAttributeValues": {":id": {"SS": [token_id]}},
                }
            },
        ]
        try:
            transact(self._db, items)
        except CancelledTransaction:  # no such token of this owner: nothing deleted, nothing uncounted
            return False
        return True
