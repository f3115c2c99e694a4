"""The /lfs routes check credentials themselves (dfd.identity.credentials, through dfd.handlers.lfs): every route, with
a missing, expired, revoked, malformed or foreign-pool credential, answers git-lfs's 401 with the Basic challenge
and the LFS error body BEFORE anything is read; valid ones (Basic with a personal access token or an access
token, Bearer access token) reach the services."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from dfd import deps
from dfd.handlers import lfs as lfs_handler
from dfd.identity.credentials import ACCESS_SCOPE, CredentialChecker
from dfd.identity.jwtverify import JwtVerifier
from dfd.identity.pats import PatService
from dfd.lfs.locks import LockService
from tests.support import ALICE, LambdaContext, api_event
from tests.unit.fakes.lfs import FakeDirectory, FakeLockStore, FakeTokenStore

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_TEST"
CLIENT = "testclient0000000000000000"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
FOREIGN_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
LFS_JSON = "application/vnd.git-lfs+json"
OID = "a" * 64
UPLOAD = "0" * 32
ROUTES: list[tuple[str, str, str, dict[str, str], Any]] = [
    (
        "POST",
        "/lfs/game/objects/batch",
        "POST /lfs/{repo}/objects/batch",
        {"repo": "game"},
        {"operation": "download", "objects": [{"oid": OID, "size": 1}]},
    ),
    (
        "POST",
        f"/lfs/game/verify/{'0' * 32}",
        "POST /lfs/{repo}/verify/{id}",
        {"repo": "game", "id": "0" * 32},
        {"oid": OID, "size": 1},
    ),
    ("POST", "/lfs/game/locks", "POST /lfs/{repo}/locks", {"repo": "game"}, {"path": "a.bin"}),
    ("GET", "/lfs/game/locks", "GET /lfs/{repo}/locks", {"repo": "game"}, None),
    ("POST", "/lfs/game/locks/verify", "POST /lfs/{repo}/locks/verify", {"repo": "game"}, {}),
    ("POST", f"/lfs/game/locks/{OID}/unlock", "POST /lfs/{repo}/locks/{id}/unlock", {"repo": "game", "id": OID}, {}),
    *(
        (
            method,
            f"/lfs/game/uploads/{UPLOAD}{tail}",
            f"{method} /lfs/{{repo}}/uploads/{{id}}{tail}",
            {"repo": "game", "id": UPLOAD},
            body,
        )
        for method, tail, body in (
            ("POST", "/parts", {"parts": [{"part_number": 1}]}),
            ("GET", "/parts", None),
            ("POST", "/complete", {}),
            ("DELETE", "", None),
        )
    ),
]


def access_token(key: RSAKey = KEY, **overrides: Any) -> str:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": ALICE.sub,
        "iss": ISSUER,
        "client_id": CLIENT,
        "token_use": "access",
        "scope": ACCESS_SCOPE,
        "iat": now - 10,
        "exp": now + 3600,
        "username": "alice",
        "cognito:groups": ["tenant-acme"],
    }
    claims.update(overrides)
    return jwt.encode({"alg": "RS256", "kid": "k1"}, {k: v for k, v in claims.items() if v is not None}, key)


def basic(secret: str, user: str = "git") -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


class Untouchable:
    """A service the request must never reach (credentials are checked before any read)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was called before the credentials were checked")


class Recorder:
    """A service that records who reached it."""

    def __init__(self) -> None:
        self.callers: list[Any] = []

    @property
    def multipart(self) -> Recorder:
        return self

    def __getattr__(self, name: str) -> Any:
        def call(caller: Any, *args: Any, **options: Any) -> Any:
            self.callers.append(caller)
            if name == "create":
                return 201, {"lock": {}}
            answers = {"batch": {"transfer": "basic", "objects": []}, "presign_parts": {"parts": []}}
            return answers.get(name, {"status": "pending"} if name == "complete" else {})

        return call


@pytest.fixture
def tokens() -> FakeTokenStore:
    return FakeTokenStore()


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch, tokens: FakeTokenStore) -> Iterator[PatService]:
    jwks = {"keys": [KEY.as_dict(private=False)]}
    verifier = JwtVerifier(
        issuer=ISSUER, client_id=CLIENT, jwks=lambda: jwks, token_uses=("access",), required_scopes=(ACCESS_SCOPE,)
    )
    pats = PatService(tokens, FakeDirectory())
    monkeypatch.setattr(deps, "credentials", lambda: CredentialChecker(verifier, pats))
    monkeypatch.setattr(deps, "lfs_service", Untouchable)
    monkeypatch.setattr(deps, "lock_service", Untouchable)
    yield pats


def invoke(route: tuple[str, str, str, dict[str, str], Any], headers: Mapping[str, str]) -> dict[str, Any]:
    method, path, route_key, params, body = route
    event = api_event(method, path, body=body, headers={"accept": LFS_JSON, **headers}, user=None)
    event.update(routeKey=route_key, pathParameters=params)
    event["headers"].pop("authorization", None)
    if "authorization" in headers:
        event["headers"]["authorization"] = headers["authorization"]
    response: dict[str, Any] = lfs_handler.handler(event, LambdaContext())
    return response


def bad_credentials(pats: PatService, tokens: FakeTokenStore) -> dict[str, dict[str, str]]:
    revoked = pats.create(ALICE.caller, {"name": "old"})
    pats.revoke(ALICE.caller, revoked["id"])
    expired = pats.create(ALICE.caller, {"name": "expired", "expires_in_days": 1})
    record = tokens.tokens[expired["id"]]
    tokens.tokens[expired["id"]] = type(record)(
        **{**{f: getattr(record, f) for f in record.__slots__}, "expires_at": record.created_at.replace(year=2000)}
    )
    return {
        "missing": {},
        "empty": {"authorization": ""},
        "expired access token": {"authorization": f"Bearer {access_token(exp=int(time.time()) - 3600)}"},
        "expired access token as Basic": {"authorization": basic(access_token(exp=int(time.time()) - 3600))},
        "expired personal token": {"authorization": basic(expired["token"])},
        "revoked personal token": {"authorization": basic(revoked["token"])},
        "unknown personal token": {"authorization": basic("dfd_pat_0123456789abcdef_" + "x" * 43)},
        "malformed Basic": {"authorization": "Basic !!!not-base64"},
        "Basic without colon": {"authorization": "Basic " + base64.b64encode(b"nocolon").decode()},
        "malformed Bearer": {"authorization": "Bearer not.a.jwt"},
        "other scheme": {"authorization": "Digest username=alice"},
        "id token": {"authorization": f"Bearer {access_token(token_use='id', aud=CLIENT, client_id=None)}"},
        "no scope": {"authorization": f"Bearer {access_token(scope=None)}"},
        "foreign pool": {"authorization": f"Bearer {access_token(iss=ISSUER + 'OTHER')}"},
        "foreign client": {"authorization": f"Bearer {access_token(client_id='someoneelse')}"},
        "foreign key": {"authorization": f"Bearer {access_token(FOREIGN_KEY)}"},
        "alg none": {"authorization": "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."},
    }


@pytest.mark.parametrize("route", ROUTES, ids=[r[2] for r in ROUTES])
def test_every_lfs_route_refuses_bad_credentials_before_any_read(
    wired: PatService, tokens: FakeTokenStore, route: tuple[str, str, str, dict[str, str], Any]
) -> None:
    for name, headers in bad_credentials(wired, tokens).items():
        response = invoke(route, headers)
        assert response["statusCode"] == 401, name
        assert response["headers"]["LFS-Authenticate"] == 'Basic realm="dfd"', name
        assert response["headers"]["Content-Type"] == LFS_JSON, name
        body = json.loads(response["body"])
        assert set(body) == {"message", "request_id", "documentation_url"}, name


@pytest.mark.parametrize("route", ROUTES, ids=[r[2] for r in ROUTES])
def test_valid_credentials_reach_the_route_as_their_user(
    wired: PatService, monkeypatch: pytest.MonkeyPatch, route: tuple[str, str, str, dict[str, str], Any]
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(deps, "lfs_service", lambda: recorder)
    monkeypatch.setattr(deps, "lock_service", lambda: recorder)
    pat = wired.create(ALICE.caller, {"name": "laptop"})["token"]
    for headers in (
        {"authorization": basic(pat)},
        {"authorization": basic(pat, user="anyone")},
        {"authorization": basic(access_token())},
        {"authorization": f"Bearer {access_token()}"},
        {"authorization": f"Bearer {pat}"},
    ):
        response = invoke(route, headers)
        assert response["statusCode"] in (200, 201, 202), response
    assert [caller.tenant for caller in recorder.callers] == ["acme"] * 5


def test_a_wrong_accept_is_406_and_throttling_429_with_retry_after(
    wired: PatService, monkeypatch: pytest.MonkeyPatch
) -> None:
    pat = wired.create(ALICE.caller, {"name": "laptop"})["token"]
    response = invoke(ROUTES[0], {"authorization": basic(pat), "accept": "text/html"})
    assert response["statusCode"] == 406
    from dfd.core.errors import DfdError, ServiceUnavailable

    class Busy:
        def batch(self, *args: Any) -> Any:
            raise ServiceUnavailable("throttled")

    monkeypatch.setattr(deps, "lfs_service", Busy)
    response = invoke(ROUTES[0], {"authorization": basic(pat)})
    assert response["statusCode"] == 429 and response["headers"]["Retry-After"] == "2"

    class Bounded(DfdError):  # a rate bound of the domain naming its own wait
        status = 429

    class Limited:
        def batch(self, *args: Any) -> Any:
            raise Bounded("slow down", details={"retry_after": 17})

    monkeypatch.setattr(deps, "lfs_service", Limited)
    response = invoke(ROUTES[0], {"authorization": basic(pat)})
    assert response["statusCode"] == 429 and response["headers"]["Retry-After"] == "17"


def test_an_ambiguous_tenant_is_403(wired: PatService) -> None:
    token = access_token(**{"cognito:groups": ["tenant-acme", "tenant-globex"]})
    response = invoke(ROUTES[0], {"authorization": f"Bearer {token}"})
    assert response["statusCode"] == 403
    assert json.loads(response["body"])["message"] == "the caller belongs to more than one tenant"


def test_locks_verify_answers_any_valid_repo_with_empty_lists(
    wired: PatService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deps, "lock_service", lambda: LockService(FakeLockStore()))
    response = invoke(ROUTES[4], {"authorization": f"Bearer {access_token()}"})
    assert response["statusCode"] == 200 and json.loads(response["body"]) == {"ours": [], "theirs": []}


@pytest.mark.parametrize("route", ROUTES, ids=[r[2] for r in ROUTES])
@pytest.mark.parametrize("repo", ["\U0003c265", "%F0%BC%89%A5", "..", "a b", "x" * 101])
def test_a_malformed_repository_is_404_before_the_credentials_and_any_read(
    wired: PatService, route: tuple[str, str, str, dict[str, str], Any], repo: str
) -> None:
    """A malformed repository (``GET /lfs/%F0%BC%89%A5/locks``) is a 404 on every route, checked before anything
    else."""
    method, path, route_key, params, body = route
    for headers in ({}, {"authorization": f"Bearer {access_token()}"}):
        response = invoke((method, path, route_key, params | {"repo": repo}, body), headers)
        assert response["statusCode"] == 404, (repo, headers)
        assert json.loads(response["body"])["message"].startswith("no such repository")


@pytest.mark.parametrize("route", [r for r in ROUTES if "id" in r[3]], ids=lambda r: r[2])
@pytest.mark.parametrize("ident", ["not-an-id", "A" * 64, "0" * 33])
def test_a_malformed_id_is_404_before_the_credentials_and_any_read(
    wired: PatService, route: tuple[str, str, str, dict[str, str], Any], ident: str
) -> None:
    method, path, route_key, params, body = route
    response = invoke((method, path, route_key, params | {"id": ident}, body), {})
    assert response["statusCode"] == 404


@pytest.mark.parametrize(
    ("route", "body"),
    [
        (ROUTES[4], {"limit": {}}),  # an object where an integer belongs
        (ROUTES[4], {"limit": "2"}),
        (ROUTES[4], {"ref": "main"}),
        (ROUTES[4], []),
        (ROUTES[2], {"path": "a.bin", "ref": 1}),
        (ROUTES[2], None),
        (ROUTES[5], {"force": 1}),
        (ROUTES[5], {"tenant": "Not A Tenant"}),
    ],
)
def test_malformed_lock_bodies_are_422_before_any_read(
    wired: PatService, route: tuple[str, str, str, dict[str, str], Any], body: Any
) -> None:
    method, path, route_key, params, _ = route
    response = invoke((method, path, route_key, params, body), {"authorization": f"Bearer {access_token()}"})
    assert response["statusCode"] == 422, response


@pytest.mark.parametrize("query", [{"limit": "{}"}, {"limit": "0"}, {"cursor": "x"}, {"tenant": "A"}])
def test_a_malformed_lock_query_is_422_before_any_read(wired: PatService, query: dict[str, str]) -> None:
    method, path, route_key, params, _ = ROUTES[3]
    event = api_event(method, path, query=query, headers={"accept": LFS_JSON}, user=None)
    event.update(routeKey=route_key, pathParameters=params)
    event["headers"]["authorization"] = f"Bearer {access_token()}"
    response = lfs_handler.handler(event, LambdaContext())
    assert response["statusCode"] == 422, response


def test_the_verify_link_is_the_configured_api_never_the_requests_host(
    wired: PatService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verify href is never built from Host or X-Forwarded-Proto, which a client chooses."""
    seen: list[str] = []

    class Batch:
        def batch(self, caller: Any, repo: str, body: Any, api_url: str, authorization: str | None = None) -> Any:
            seen.append(api_url)
            return {"transfer": "basic", "objects": [], "hash_algo": "sha256"}

    monkeypatch.setattr(deps, "lfs_service", Batch)
    headers = {"authorization": f"Bearer {access_token()}", "host": "evil.example", "x-forwarded-proto": "http"}
    response = invoke(ROUTES[0], headers)
    assert response["statusCode"] == 200
    api_id = api_event("GET", "/")["requestContext"]["apiId"]
    assert seen == [f"https://{api_id}.execute-api.us-east-1.amazonaws.com"]
