"""The local JWT authorizer (dfdlocal.jwtauth): what API Gateway's JWT authorizer accepts, and nothing else."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

import pytest
from joserfc import jws, jwt
from joserfc.jwk import RSAKey

from dfdlocal.jwtauth import JwtVerifier, TokenRejected, api_gateway_claims

NOW = 1_700_000_000
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_TESTPOOL"
CLIENT = "testclient123"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})


class FakeJwks:
    """A JWKS source serving the public halves of ``keys`` and counting fetches."""

    def __init__(self, *keys: RSAKey) -> None:
        self.keys = list(keys)
        self.fetches = 0

    def __call__(self) -> Mapping[str, Any]:
        self.fetches += 1
        return {"keys": [key.as_dict(private=False) for key in self.keys]}


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def access_claims(**overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "sub": "7d8e2f4a-1b2c-4d5e-8f90-a1b2c3d4e5f6",
        "iss": ISSUER,
        "client_id": CLIENT,
        "token_use": "access",
        "scope": "aws.cognito.signin.user.admin",
        "auth_time": NOW - 60,
        "iat": NOW - 60,
        "exp": NOW + 3600,
        "jti": "5f0c4b1e-0000-4000-8000-000000000001",
        "username": "alice",
        "cognito:groups": ["admins", "tenant-acme"],
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def sign(claims: Mapping[str, Any], key: RSAKey = KEY, kid: str | None = "k1", alg: str = "RS256") -> str:
    header: dict[str, Any] = {"alg": alg}
    if kid is not None:
        header["kid"] = kid
    return jwt.encode(header, dict(claims), key, algorithms=[alg])


def verifier(jwks: FakeJwks | None = None, clock: Clock | None = None, **options: Any) -> JwtVerifier:
    return JwtVerifier(issuer=ISSUER, client_id=CLIENT, jwks=jwks or FakeJwks(KEY), clock=clock or Clock(), **options)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_valid_access_token_passes_with_or_without_bearer() -> None:
    token = sign(access_claims())
    check = verifier()
    assert check.verify(token) == access_claims()
    assert check.verify_authorization(f"Bearer {token}")["username"] == "alice"
    assert check.verify_authorization(f"bearer  {token} ")["username"] == "alice"
    assert check.verify_authorization(token)["username"] == "alice"


def test_the_jwks_is_cached() -> None:
    jwks = FakeJwks(KEY)
    check = verifier(jwks)
    for _ in range(3):
        check.verify(sign(access_claims()))
    assert jwks.fetches == 1


def test_edited_payload_with_the_original_signature_is_refused() -> None:
    header, _, signature = sign(access_claims()).split(".")
    forged = b64(json.dumps(access_claims(**{"cognito:groups": ["admins"], "username": "mallory"})).encode())
    with pytest.raises(TokenRejected, match="signature"):
        verifier().verify(f"{header}.{forged}.{signature}")


def test_alg_none_is_refused() -> None:
    header = b64(json.dumps({"alg": "none", "kid": "k1"}).encode())
    payload = b64(json.dumps(access_claims()).encode())
    for token in (f"{header}.{payload}.", f"{header}.{payload}.{b64(b'x')}"):
        with pytest.raises(TokenRejected, match="algorithm"):
            verifier().verify(token)


def test_hs256_signed_with_the_public_key_is_refused() -> None:
    """Algorithm confusion: the RSA public key (as PEM and as JWK JSON) used as an HMAC secret. joserfc will not
    even make such a key, so the attacker's token is made by hand."""
    public_pem = KEY.as_pem(private=False)
    public_json = json.dumps(KEY.as_dict(private=False)).encode()
    signing_input = (
        f"{b64(json.dumps({'alg': 'HS256', 'kid': 'k1'}).encode())}.{b64(json.dumps(access_claims()).encode())}"
    )
    for secret in (public_pem, public_json):
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        with pytest.raises(TokenRejected, match="algorithm"):
            verifier().verify(f"{signing_input}.{b64(mac)}")


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256"])
def test_other_rsa_algorithms_are_refused(alg: str) -> None:
    same_key_any_alg = RSAKey.import_key({k: v for k, v in KEY.as_dict(private=True).items() if k != "alg"})
    with pytest.raises(TokenRejected, match="algorithm"):
        verifier().verify(sign(access_claims(), key=same_key_any_alg, alg=alg))


def test_a_corrupted_signature_is_refused() -> None:
    header, payload, signature = sign(access_claims()).split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[10] ^= 0x01
    with pytest.raises(TokenRejected, match="signature"):
        verifier().verify(f"{header}.{payload}.{b64(bytes(raw))}")
    with pytest.raises(TokenRejected):
        verifier().verify(f"{header}.{payload}.")


def test_a_token_signed_by_another_key_with_the_same_kid_is_refused() -> None:
    with pytest.raises(TokenRejected, match="signature"):
        verifier().verify(sign(access_claims(), key=OTHER_KEY))


def test_expiry_with_a_small_leeway() -> None:
    check = verifier(leeway_seconds=10)
    assert check.verify(sign(access_claims(exp=NOW - 5)))  # within the leeway
    for exp in (NOW - 11, NOW - 3600):
        with pytest.raises(TokenRejected, match="exp"):
            check.verify(sign(access_claims(exp=exp)))


def test_a_token_without_exp_is_refused() -> None:
    with pytest.raises(TokenRejected, match="exp"):
        verifier().verify(sign(access_claims(exp=None)))


def test_not_yet_valid_is_refused() -> None:
    check = verifier(leeway_seconds=10)
    assert check.verify(sign(access_claims(nbf=NOW + 5)))
    with pytest.raises(TokenRejected, match="nbf"):
        check.verify(sign(access_claims(nbf=NOW + 60)))
    with pytest.raises(TokenRejected, match="iat"):
        check.verify(sign(access_claims(iat=NOW + 60)))


@pytest.mark.parametrize("iss", [ISSUER + "x", "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_OTHER", 42, None])
def test_another_issuer_is_refused(iss: Any) -> None:
    with pytest.raises(TokenRejected):
        verifier().verify(sign(access_claims(iss=iss)))


@pytest.mark.parametrize("client_id", ["otherclient", "", None])
def test_another_client_is_refused(client_id: Any) -> None:
    with pytest.raises(TokenRejected, match="client_id"):
        verifier().verify(sign(access_claims(client_id=client_id)))


def test_aud_wins_over_client_id_like_api_gateway() -> None:
    """API Gateway checks aud when present, client_id only when aud is absent."""
    with pytest.raises(TokenRejected, match="aud"):
        verifier().verify(sign(access_claims(aud="otherclient")))
    assert verifier().verify(sign(access_claims(aud=[CLIENT, "x"], client_id="other")))


def test_an_unknown_kid_refetches_the_jwks_once_then_is_refused() -> None:
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "alg": "RS256", "use": "sig"})
    jwks = FakeJwks(KEY)
    clock = Clock()
    check = verifier(jwks, clock, min_refetch_seconds=30)
    check.verify(sign(access_claims()))
    assert jwks.fetches == 1
    with pytest.raises(TokenRejected, match="unknown key"):
        check.verify(sign(access_claims(), key=rotated, kid="k2"))
    assert jwks.fetches == 1  # fetched less than 30 s ago: not again (unknown kids cannot flood the issuer)

    jwks.keys.append(rotated)  # key rotation at the issuer
    clock.now += 31
    assert check.verify(sign(access_claims(), key=rotated, kid="k2"))
    assert jwks.fetches == 2
    assert check.verify(sign(access_claims()))  # the old key is still in the set
    assert jwks.fetches == 2


def test_a_token_without_kid_is_refused() -> None:
    with pytest.raises(TokenRejected, match="kid"):
        verifier().verify(sign(access_claims(), kid=None))


def test_a_failing_jwks_source_refuses_every_token() -> None:
    def broken() -> Mapping[str, Any]:
        raise OSError("connection refused")

    check = JwtVerifier(issuer=ISSUER, client_id=CLIENT, jwks=broken, clock=Clock())
    with pytest.raises(TokenRejected, match="unknown key"):
        check.verify(sign(access_claims()))


def test_an_id_token_is_refused_by_default_and_accepted_when_configured() -> None:
    id_claims = access_claims(client_id=None, scope=None, aud=CLIENT, token_use="id")
    id_claims["cognito:username"] = id_claims.pop("username")
    with pytest.raises(TokenRejected, match="token_use"):
        verifier().verify(sign(id_claims))
    assert verifier(token_uses=("access", "id")).verify(sign(id_claims))["cognito:username"] == "alice"


def test_a_token_without_token_use_is_refused() -> None:
    with pytest.raises(TokenRejected, match="token_use"):
        verifier().verify(sign(access_claims(token_use=None)))


def test_required_scopes() -> None:
    check = verifier(required_scopes=["aws.cognito.signin.user.admin"])
    assert check.verify(sign(access_claims()))
    for scope in (None, "openid", ""):
        with pytest.raises(TokenRejected, match="scope"):
            check.verify(sign(access_claims(scope=scope)))


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "Bearer",
        "Bearer ",
        "garbage",
        "a.b",
        "a.b.c",
        "a.b.c.d",
        "....",
        "Basic dXNlcjpwYXNz",
        "eyJhbGciOiJSUzI1NiJ9.e30.",
        f"{b64(b'not json')}.{b64(b'{}')}.{b64(b'sig')}",
        f"{b64(json.dumps([1, 2]).encode())}.{b64(b'{}')}.{b64(b'sig')}",
        "é.é.é",
        "x" * 20000,
    ],
)
def test_garbage_is_refused(value: str) -> None:
    with pytest.raises(TokenRejected):
        verifier().verify_authorization(value)


def test_a_payload_that_is_not_an_object_is_refused() -> None:
    token = jws.serialize_compact({"alg": "RS256", "kid": "k1"}, b"[1,2,3]", KEY, algorithms=["RS256"])
    with pytest.raises(TokenRejected):
        verifier().verify(token)


def test_no_authorization_header_is_refused() -> None:
    with pytest.raises(TokenRejected):
        verifier().verify_authorization(None)


def test_api_gateway_claims_are_strings_like_api_gateway_passes_them() -> None:
    claims = access_claims(email_verified=True, ratio=0.5, big=1.7e9, nested={"b": 1, "a": [1]}, gone=None)
    assert api_gateway_claims(claims) == {
        "sub": "7d8e2f4a-1b2c-4d5e-8f90-a1b2c3d4e5f6",
        "iss": ISSUER,
        "client_id": CLIENT,
        "token_use": "access",
        "scope": "aws.cognito.signin.user.admin",
        "auth_time": str(NOW - 60),
        "iat": str(NOW - 60),
        "exp": str(NOW + 3600),
        "jti": "5f0c4b1e-0000-4000-8000-000000000001",
        "username": "alice",
        "cognito:groups": "[admins tenant-acme]",
        "email_verified": "true",
        "ratio": "0.5",
        "big": "1700000000",
        "nested": '{"a":[1],"b":1}',
    }
    assert api_gateway_claims({"cognito:groups": []}) == {"cognito:groups": "[]"}
    assert api_gateway_claims({"cognito:groups": ["admins"]}) == {"cognito:groups": "[admins]"}
