"""dfdlocal.s3session's pure parts: which IAM action an S3 request is, and the policy evaluation the local S3
applies to sessions of STS-issued credentials (IAM's rules: an explicit Deny wins, the role's policies and the
session policy must each allow)."""

from __future__ import annotations

import pytest

from dfd.identity.s3access import prefix_for, session_policy
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
