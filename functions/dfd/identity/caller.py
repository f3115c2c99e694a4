"""Who is calling: API Gateway's JWT-authorizer claims turned into a :class:`Caller`, in ONE place.

API Gateway's HTTP API JWT authorizer verifies the Cognito access token (signature, issuer, audience/client,
expiry) before the function runs and hands its claims over in ``requestContext.authorizer.jwt.claims``. No
handler reads claims itself: it calls :func:`current_caller` (or :func:`caller_from_event`).

Rules:

* ``owner`` is the token's ``sub``. No claims or no valid ``sub`` → 401 ``unauthorized`` (defence in depth:
  a function reached without the authorizer never serves an anonymous caller).
* Tenants are Cognito groups named ``tenant-<name>`` where ``<name>`` matches ``[a-z0-9][a-z0-9-]{0,63}``;
  the caller's tenant is then ``<name>``. A group that starts with ``tenant-`` but has an invalid name is
  refused (403 ``invalid_tenant``) rather than ignored: ignoring it would silently drop the user into a
  personal tenant, hiding their tenant's files and storing their uploads in the wrong place.
* No tenant group → a tenant of one: tenant = ``user:<sub>``. The ``user:`` prefix contains a colon, which a
  named tenant never does, so a personal tenant can never collide with a named one (``tenant-user`` → ``user``).
* More than one tenant group → 403 ``ambiguous_tenant``.
* The group ``admins`` → ``is_admin``.
* ``cognito:groups`` arrives as a JSON list (in-process events, id tokens), as a JSON-list string, or as API
  Gateway's bracketed, space-separated string ``"[admins tenant-acme]"``; all are parsed. Anything else
  (a number, an object, an unbracketed string, quotes or brackets inside a bracketed item) → 401
  ``unauthorized``: claims that cannot be read establish no identity.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.data_classes.api_gateway_proxy_event import APIGatewayProxyEventV2

from dfd.core.errors import Forbidden, Unauthorized

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver

ADMIN_GROUP = "admins"
TENANT_GROUP_PREFIX = "tenant-"
PERSONAL_TENANT_PREFIX = "user:"
GROUPS_CLAIM = "cognito:groups"

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
# Cognito subs are UUIDs; this admits any id that is safe inside keys and logs.
SUBJECT = re.compile(r"[A-Za-z0-9._-]{1,128}")
_BRACKETED_FORBIDDEN = frozenset('[]"')


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated caller of one request."""

    owner: str  # the token's `sub`
    tenant: str  # `<name>` of the caller's `tenant-<name>` group, or `user:<sub>` (a tenant of one)
    is_admin: bool
    username: str | None = None
    groups: tuple[str, ...] = ()
    # the personal access token the caller authenticated with, if it did: how, not who (not compared)
    token_id: str | None = field(default=None, compare=False)

    @property
    def has_personal_tenant(self) -> bool:
        """True for a tenant of one (the caller belongs to no `tenant-<name>` group)."""
        return self.tenant.startswith(PERSONAL_TENANT_PREFIX)


def personal_tenant(sub: str) -> str:
    """The tenant of a user in no tenant group."""
    return PERSONAL_TENANT_PREFIX + sub


def caller_from_claims(claims: Mapping[str, Any] | None) -> Caller:
    """The caller described by JWT claims (API Gateway's string form or the token's own JSON types).

    Raises Unauthorized (401) when no identity can be established, Forbidden (403) when the caller's tenant
    membership is unusable (``ambiguous_tenant``, ``invalid_tenant``).
    """
    if not isinstance(claims, Mapping) or not claims:
        raise Unauthorized("no verified identity on this request")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not SUBJECT.fullmatch(sub):
        raise Unauthorized("the token has no valid subject")
    groups = parse_groups(claims.get(GROUPS_CLAIM))

    tenants: list[str] = []
    for group in groups:
        if not group.startswith(TENANT_GROUP_PREFIX):
            continue
        name = group.removeprefix(TENANT_GROUP_PREFIX)
        if not TENANT_NAME.fullmatch(name):
            raise Forbidden("the caller belongs to a tenant group with an invalid name", code="invalid_tenant")
        if name not in tenants:
            tenants.append(name)
    if len(tenants) > 1:
        raise Forbidden("the caller belongs to more than one tenant", code="ambiguous_tenant")
    tenant = tenants[0] if tenants else personal_tenant(sub)

    username = claims.get("username", claims.get("cognito:username"))
    return Caller(
        owner=sub,
        tenant=tenant,
        is_admin=ADMIN_GROUP in groups,
        username=username if isinstance(username, str) and username else None,
        groups=groups,
    )


def parse_groups(value: Any) -> tuple[str, ...]:
    """``cognito:groups`` in any of its three forms → the group names (empty when absent).

    A string is JSON when its first item starts with a quote (``'["admins","tenant-acme"]'``), else API
    Gateway's bracketed form (``"[admins tenant-acme]"``, so ``"[123]"`` is the group ``123``).
    """
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if not (text.startswith("[") and text.endswith("]")):
            raise Unauthorized("malformed cognito:groups claim")
        inner = text[1:-1].strip()
        if inner.startswith('"'):
            try:
                value = json.loads(text)
            except ValueError:
                raise Unauthorized("malformed cognito:groups claim") from None
        else:
            items = inner.split()
            if any(_BRACKETED_FORBIDDEN & set(item) for item in items):
                raise Unauthorized("malformed cognito:groups claim")
            return tuple(items)
    if not isinstance(value, list) or not all(_is_group_name(item) for item in value):
        raise Unauthorized("malformed cognito:groups claim")
    return tuple(value)


def _is_group_name(item: Any) -> bool:
    return isinstance(item, str) and bool(item) and not any(char.isspace() for char in item)


def caller_from_event(event: APIGatewayProxyEventV2 | Mapping[str, Any]) -> Caller:
    """The caller of an API Gateway HTTP API (payload 2.0) request."""
    if not isinstance(event, APIGatewayProxyEventV2):
        event = APIGatewayProxyEventV2(dict(event))
    try:
        claims = event.request_context.authorizer.jwt_claim
    except (KeyError, AttributeError, TypeError):  # no requestContext / authorizer / jwt, or not mappings
        raise Unauthorized("no verified identity on this request") from None
    return caller_from_claims(claims)


def current_caller(app: APIGatewayHttpResolver) -> Caller:
    """The caller of the request the resolver is handling."""
    return caller_from_event(app.current_event)
