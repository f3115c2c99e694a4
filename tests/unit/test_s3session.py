"""dfdlocal.s3session's pure parts: which IAM action an S3 request is, and the policy evaluation the local S3
applies to sessions of STS-issued credentials (IAM's rules: an explicit Deny wins, the role's policies and the
session policy must each allow)."""

from __future__ import annotations

import pytest

from dfd.identity.s3access import MOVABLE_STORAGE_CLASSES, prefix_for, session_policy
from dfdlocal.s3auth import Refused
from dfdlocal.s3session import S3Request, allowed, classify, evaluate

BUCKET_ARN = "arn:aws:s3:::b"


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "action", "resource"),
    [
        ("PUT", "/b/s3/t/u/f.txt", "", {}, "s3:PutObject", "/s3/t/u/f.txt"),
        ("PUT", "/b/s3/t/u/f%20x.txt", "partNumber=1&uploadId=x", {}, "s3:PutObject", "/s3/t/u/f x.txt"),
        ("POST", "/b/k", "uploads", {}, "s3:PutObject", "/k"),
        ("POST", "/b/k", "uploadId=x", {}, "s3:PutObject", "/k"),
        ("DELETE", "/b/k", "uploadId=x", {}, "s3:AbortMultipartUpload", "/k"),
        ("GET", "/b/k", "uploadId=x", {}, "s3:ListMultipartUploadParts", "/k"),
        ("GET", "/b/k", "", {}, "s3:GetObject", "/k"),
        ("HEAD", "/b/k", "", {}, "s3:GetObject", "/k"),
        ("GET", "/b/k", "acl", {}, "s3:GetObjectAcl", "/k"),
        ("PUT", "/b/k", "acl", {}, "s3:PutObjectAcl", "/k"),
        ("PUT", "/b/k", "tagging", {}, "s3:PutObjectTagging", "/k"),
        ("DELETE", "/b/k", "", {}, "s3:DeleteObject", "/k"),
        ("GET", "/b", "list-type=2&prefix=s3%2Ft%2F", {}, "s3:ListBucket", ""),
        ("HEAD", "/b", "", {}, "s3:ListBucket", ""),
        ("GET", "/b", "uploads", {}, "s3:ListBucketMultipartUploads", ""),
        ("GET", "/b", "policy", {}, "s3:BucketConfiguration", ""),
        ("POST", "/b", "delete", {}, "s3:DeleteObject", "/*"),
    ],
)
def test_the_action_and_resource_of_a_request(
    method: str, path: str, query: str, headers: dict[str, str], action: str, resource: str
) -> None:
    request = classify(method, path, query, headers)
    assert (request.action, request.resource) == (action, BUCKET_ARN + resource)


def test_a_listing_s_prefix_and_a_copy_s_source_are_part_of_the_request() -> None:
    assert classify("GET", "/b", "list-type=2&prefix=s3%2Ft%2F", {}).context == {"s3:prefix": "s3/t/"}
    assert "s3:prefix" not in classify("GET", "/b", "list-type=2", {}).context
    copy = classify("PUT", "/b/s3/t/u/copy", "", {"x-amz-copy-source": "/b/uploads/secret?versionId=1"})
    assert copy.also == (("s3:GetObject", "arn:aws:s3:::b/uploads/secret"),)


def test_a_dot_in_a_prefix_is_a_dot_not_any_character() -> None:
    policy = session_policy("b", prefix_for("t", "a.b"))
    assert evaluate(policy, "s3:PutObject", "arn:aws:s3:::b/s3/t/a.b/f", {}) == "Allow"
    assert evaluate(policy, "s3:PutObject", "arn:aws:s3:::b/s3/t/aXb/f", {}) is None


def test_conditions() -> None:
    policy = session_policy("b", prefix_for("t", "u"))
    assert evaluate(policy, "s3:ListBucket", BUCKET_ARN, {"s3:prefix": "s3/t/u/"}) == "Allow"
    assert evaluate(policy, "s3:ListBucket", BUCKET_ARN, {"s3:prefix": "s3/t/"}) is None
    assert evaluate(policy, "s3:ListBucket", BUCKET_ARN, {}) is None  # StringLike on an absent key: no match
    deny = {
        "Statement": [
            {
                "Effect": "Deny",
                "Action": "s3:PutObject",
                "Resource": "*",
                "Condition": {"Null": {"s3:x-amz-acl": "false"}},
            },
            {
                "Effect": "Deny",
                "Action": "s3:ListBucket",
                "Resource": "*",
                "Condition": {"StringNotLike": {"s3:prefix": "s3/*"}},
            },
        ]
    }
    assert evaluate(deny, "s3:PutObject", "arn:aws:s3:::b/k", {"s3:x-amz-acl": "private"}) == "Deny"
    assert evaluate(deny, "s3:PutObject", "arn:aws:s3:::b/k", {}) is None
    assert evaluate(deny, "s3:ListBucket", BUCKET_ARN, {}) == "Deny"  # StringNotLike on an absent key: matches
    assert evaluate(deny, "s3:ListBucket", BUCKET_ARN, {"s3:prefix": "s3/x"}) is None
    with pytest.raises(Refused):
        evaluate(
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "*",
                        "Resource": "*",
                        "Condition": {"IpAddress": {"aws:SourceIp": "203.0.113.0/24"}},
                    }
                ]
            },
            "s3:PutObject",
            "r",
            {},
        )


def test_the_role_and_the_session_must_both_allow_and_a_deny_wins() -> None:
    session = session_policy("b", prefix_for("t", "u"))
    role = {"Statement": [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/s3/*"}]}
    put = S3Request("s3:PutObject", "arn:aws:s3:::b/s3/t/u/f", {})
    assert allowed([session], [role], put)
    assert not allowed([session], [], put)  # a role without a policy grants nothing
    assert not allowed([], [role], S3Request("s3:PutObject", "arn:aws:s3:::b/uploads/f", {}))
    assert not allowed([session], [role], S3Request("s3:AbortMultipartUpload", "arn:aws:s3:::b/s3/t/u/f", {}))
    deny = {"Statement": [{"Effect": "Deny", "NotAction": "s3:ListBucket", "Resource": "*"}]}
    assert not allowed([session], [role, deny], put)
    copy = S3Request("s3:PutObject", "arn:aws:s3:::b/s3/t/u/f", {}, (("s3:GetObject", "arn:aws:s3:::b/s3/t/u/g"),))
    assert not allowed([session], [role], copy)


ROLE = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/s3/*"}]}
OWN = prefix_for("t", "u")


def _allowed(method: str, path: str, query: str = "", headers: dict[str, str] | None = None) -> bool:
    return allowed([session_policy("b", OWN)], [ROLE], classify(method, path, query, headers or {}))


@pytest.mark.parametrize(
    ("method", "path", "query"),
    [
        ("GET", "/b", f"list-type=2&prefix=uploads/&prefix={OWN}"),
        ("GET", "/b", f"list-type=2&prefix={OWN}&prefix=uploads/"),
        ("GET", "/b", f"list-type=2&list-type=1&prefix={OWN}"),
        ("GET", "/b", f"list-type=2&prefix={OWN}&delimiter=/&delimiter=x"),
        ("PUT", f"/b/{OWN}f", "partNumber=1&partNumber=2&uploadId=x"),
        ("PUT", f"/b/{OWN}f", "partNumber=1&uploadId=x&uploadId=y"),
        ("GET", f"/b/{OWN}f", "uploadId=x&uploadId="),
        ("DELETE", f"/b/{OWN}f", "versionId=1&versionId=2"),
        ("PUT", f"/b/{OWN}f", "x-id=PutObject&x-id=PutObjectTagging"),
        ("PUT", f"/b/{OWN}f", "tagging&tagging"),
    ],
)
def test_a_repeated_query_parameter_is_refused_before_any_decision(method: str, path: str, query: str) -> None:
    with pytest.raises(Refused) as refused:
        classify(method, path, query, {})
    assert (refused.value.status, refused.value.code) == (400, "InvalidArgument")


def test_a_virtual_hosted_request_is_the_bucket_of_its_host_and_the_key_of_its_whole_path() -> None:
    virtual = {"host": "b.localhost:4566"}
    assert classify("PUT", f"/{OWN}f", "", virtual).resource == f"arn:aws:s3:::b/{OWN}f"
    assert classify("PUT", f"/b/{OWN}f", "", virtual).resource == f"arn:aws:s3:::b/b/{OWN}f"
    assert _allowed("PUT", f"/{OWN}f", "", virtual)
    assert not _allowed("PUT", f"/b/{OWN}f", "", virtual)  # the key b/s3/... is outside the prefix
    for path_style in ({"host": "localhost:4566"}, {"host": "127.0.0.1:4566"}, {}):
        assert classify("PUT", f"/b/{OWN}f", "", path_style).resource == f"arn:aws:s3:::b/{OWN}f"
    for host in ("b.s3-accesspoint.us-east-1.amazonaws.com", "123.s3-control.us-east-1.amazonaws.com"):
        with pytest.raises(Refused):
            classify("PUT", f"/b/{OWN}f", "", {"host": host})


def test_a_path_that_is_not_utf_8_is_refused() -> None:
    with pytest.raises(Refused) as refused:
        classify("PUT", f"/b/{OWN}%FF", "", {})
    assert (refused.value.status, refused.value.code) == (400, "InvalidURI")


def test_a_head_is_a_read_whatever_its_query() -> None:
    assert classify("HEAD", f"/b/{OWN}f", "uploadId=x", {}).action == "s3:GetObject"
    assert not _allowed("HEAD", f"/b/{OWN}f", "uploadId=x")
    assert _allowed("GET", f"/b/{OWN}f", "uploadId=x")  # ListParts


def test_a_write_that_tags_or_locks_needs_that_permission_too() -> None:
    tagged = {"x-amz-tagging": "a=b"}
    assert ("s3:PutObjectTagging", f"arn:aws:s3:::b/{OWN}f") in classify("PUT", f"/b/{OWN}f", "", tagged).also
    assert not _allowed("PUT", f"/b/{OWN}f", "", tagged)
    assert not _allowed("POST", f"/b/{OWN}f", "uploads", tagged)
    assert _allowed("PUT", f"/b/{OWN}f")
    locks = {
        "x-amz-object-lock-mode": ("GOVERNANCE", "s3:PutObjectRetention"),
        "x-amz-object-lock-retain-until-date": ("2030-01-01T00:00:00Z", "s3:PutObjectRetention"),
        "x-amz-object-lock-legal-hold": ("ON", "s3:PutObjectLegalHold"),
    }
    for header, (value, permission) in locks.items():
        assert (permission, f"arn:aws:s3:::b/{OWN}f") in classify("PUT", f"/b/{OWN}f", "", {header: value}).also
        role = {"Statement": [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/s3/*"}]}
        request = classify("PUT", f"/b/{OWN}f", "", {header: value})
        assert not allowed([session_policy("b", OWN)], [role], request), header


def test_the_storage_classes_the_guard_admits_are_the_session_policy_s_list() -> None:
    from moto.s3.utils import STORAGE_CLASS  # every class moto (and S3) knows

    for name in (*STORAGE_CLASS, "OUTPOSTS", "SNOW", "standard", "STANDARD,GLACIER", ""):
        for method, query in (("PUT", ""), ("POST", "uploads")):
            headers = {"x-amz-storage-class": name}
            assert _allowed(method, f"/b/{OWN}f", query, headers) == (name in MOVABLE_STORAGE_CLASSES), name
    assert _allowed("PUT", f"/b/{OWN}f")  # no storage class: STANDARD
    assert _allowed("DELETE", f"/b/{OWN}f", "uploadId=x")  # an abort names none


def test_if_exists_operators_match_an_absent_key() -> None:
    policy = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3:PutObject",
                "Resource": "*",
                "Condition": {"StringEqualsIfExists": {"s3:x-amz-storage-class": "STANDARD"}},
            }
        ]
    }
    assert evaluate(policy, "s3:PutObject", "r", {}) == "Allow"
    assert evaluate(policy, "s3:PutObject", "r", {"s3:x-amz-storage-class": "STANDARD"}) == "Allow"
    assert evaluate(policy, "s3:PutObject", "r", {"s3:x-amz-storage-class": "GLACIER"}) is None
