"""template.yaml's prefix-scoped S3 credentials: the role TokensFunction assumes (and nothing else may), its
policy the most any session gets, the bucket policy's denials for it, and the local stack creating it."""

from __future__ import annotations

from typing import Any

import pytest

from dfd.identity.s3access import LIST_ACTION, OBJECT_ACTIONS, ROOT, prefix_for, session_policy
from dfd.identity.s3credentials import MAX_DURATION
from dfdlocal.s3session import DENIED_HEADERS, OWNER_ACL, evaluate
from dfdlocal.template import read_model
from tests.unit.template_support import TEMPLATE, _describe, _template

ROLE = "S3CredentialsRole"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return _template()


def _credential_denials(template: dict[str, Any]) -> list[dict[str, Any]]:
    statements = template["Resources"]["FilesBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    return [s for s in statements if s["Sid"].startswith("S3Credentials")]


def test_the_role_is_assumed_by_tokens_function_only_for_at_most_an_hour(template: dict[str, Any]) -> None:
    role = template["Resources"][ROLE]
    assert role["Type"] == "AWS::IAM::Role" and set(role["Properties"]) == {
        "MaxSessionDuration",
        "AssumeRolePolicyDocument",
        "Policies",
    }
    assert role["Properties"]["MaxSessionDuration"] == MAX_DURATION == 3600
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Effect"] == "Allow" and trust["Action"] == "sts:AssumeRole"
    assert {key: _describe(value) for key, value in trust["Principal"].items()} == {"AWS": "TokensFunctionRole.Arn"}
    # the one grant of sts:AssumeRole on it: TokensFunctionRole's (a policy of its own: no dependency cycle)
    grants = [
        (logical_id, statement)
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if _describe(statement["Resource"]) == f"{ROLE}.Arn"
    ]
    assert [(logical_id, s["Action"]) for logical_id, s in grants] == [("S3CredentialsAssumePolicy", "sts:AssumeRole")]
    roles = template["Resources"]["S3CredentialsAssumePolicy"]["Properties"]["Roles"]
    assert [_describe(r) for r in roles] == ["Ref(TokensFunctionRole)"]
    variables = template["Resources"]["TokensFunction"]["Properties"]["Environment"]["Variables"]
    assert _describe(variables["S3_CREDENTIALS_ROLE_ARN"]) == f"{ROLE}.Arn"
    assert _describe(variables["KMS_KEY_ARN"]) == "Ref(KmsKeyArn)"


def test_the_role_s_policy_is_writes_and_listing_under_the_root_only(template: dict[str, Any]) -> None:
    (policy,) = template["Resources"][ROLE]["Properties"]["Policies"]
    write, listing = policy["PolicyDocument"]["Statement"]
    assert write["Effect"] == "Allow" and write["Action"] == list(OBJECT_ACTIONS)
    assert _describe(write["Resource"]) == "${FilesBucket.Arn}/" + ROOT + "*"
    assert listing["Effect"] == "Allow" and listing["Action"] == LIST_ACTION
    assert _describe(listing["Resource"]) == "FilesBucket.Arn"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ROOT + "*"}}


def test_every_session_policy_is_within_the_role_s_policy() -> None:
    """What a session policy allows on its prefix, the role's policy (as the local stack reads it) allows too."""
    model = read_model(TEMPLATE, "http://127.0.0.1:4566")
    assert set(model.roles) == {ROLE}  # the functions' roles are Lambda's, not emulated
    role = model.roles[ROLE]
    assert role.arn == model.environment["S3_CREDENTIALS_ROLE_ARN"]
    (document,) = [p["PolicyDocument"] for p in role.properties["Policies"]]
    prefix = prefix_for("acme", "u-1")
    session = session_policy("dfd-file-service", prefix)
    for action in OBJECT_ACTIONS:
        for policy in (session, document):
            assert evaluate(policy, action, f"arn:aws:s3:::dfd-file-service/{prefix}f", {}) == "Allow"
    for policy in (session, document):
        context = {"s3:prefix": prefix + "dir/"}
        assert evaluate(policy, LIST_ACTION, "arn:aws:s3:::dfd-file-service", context) == "Allow"


def test_the_bucket_policy_denies_the_role_all_but_writes_and_listing_under_the_root(template: dict[str, Any]) -> None:
    denials = _credential_denials(template)
    for statement in denials:
        assert statement["Effect"] == "Deny" and statement["Principal"] == "*"
        assert _describe(statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]) == f"{ROLE}.Arn"
    by_sid = {s["Sid"]: s for s in denials}
    only = by_sid["S3CredentialsOnlyWriteAndList"]
    assert only["NotAction"] == [*OBJECT_ACTIONS, LIST_ACTION]
    assert {_describe(r) for r in only["Resource"]} == {"FilesBucket.Arn", "${FilesBucket.Arn}/*"}
    outside = by_sid["S3CredentialsOnlyUnderS3Prefix"]
    assert outside["Action"] == list(OBJECT_ACTIONS)
    assert _describe(outside["NotResource"]) == "${FilesBucket.Arn}/" + ROOT + "*"
    listing = by_sid["S3CredentialsListOnlyUnderS3Prefix"]
    assert listing["Action"] == LIST_ACTION and listing["Condition"]["StringNotLike"] == {"s3:prefix": ROOT + "*"}


def test_the_bucket_policy_s_header_denials_are_the_local_guard_s(template: dict[str, Any]) -> None:
    """ACLs and SSE-C: a PutObject carrying any of these headers is denied to the role (S3 and the local S3)."""
    nulls = []
    for statement in _credential_denials(template):
        if "Null" in statement["Condition"]:
            assert statement["Action"] == "s3:PutObject"
            ((key, value),) = statement["Condition"]["Null"].items()
            assert value == "false"
            nulls.append(key)
            # the one value allowed: the local guard's exception, and only for x-amz-acl
            allowed = statement["Condition"].get("StringNotEquals")
            assert allowed == ({f"s3:{OWNER_ACL[0]}": OWNER_ACL[1]} if key == f"s3:{OWNER_ACL[0]}" else None)
    assert nulls == [f"s3:{name}" for name in DENIED_HEADERS]
