"""dfd.identity.s3access: the caller's prefix (unique, reversible) and the session policy of prefix-scoped
credentials."""

from __future__ import annotations

import itertools
import json

import pytest

from dfd.identity.s3access import (
    MAX_SEGMENT,
    MOVABLE_STORAGE_CLASSES,
    ROOT,
    parse_key,
    prefix_for,
    segment,
    session_policy,
)

CALLERS = [
    ("acme", "3f2a9c1e-0000-4000-8000-000000000001"),
    ("user:3f2a9c1e-0000-4000-8000-000000000001", "3f2a9c1e-0000-4000-8000-000000000001"),
    ("acme", "a.b"),
    ("acme", "aXb"),
    ("acme", "a"),
    ("acme", "ab"),
    ("acm", "eab"),
    ("a", "cme/ab"),
    ("acme", "."),
    ("acme", ".."),
    ("acme", "%2E"),
    ("t*", "u?"),
    ("${aws:username}", "é"),
]


def test_a_prefix_is_root_tenant_owner_each_ending_with_a_slash() -> None:
    assert prefix_for("acme", "3f2a9c1e-0000-4000-8000-000000000001") == "s3/acme/3f2a9c1e-0000-4000-8000-000000000001/"
    assert prefix_for("user:abc", "abc") == "s3/user%3Aabc/abc/"
    assert prefix_for("acme", "..") == "s3/acme/%2E%2E/"  # never a path segment a client would fold
    assert prefix_for("t*", "${x}") == "s3/t%2A/%24%7Bx%7D/"  # no IAM wildcard, no policy variable


def test_no_caller_s_prefix_is_a_prefix_of_another_s() -> None:
    prefixes = [prefix_for(tenant, owner) for tenant, owner in CALLERS]
    assert len(set(prefixes)) == len(CALLERS)
    for one, other in itertools.permutations(prefixes, 2):
        assert not other.startswith(one), (one, other)
    for prefix in prefixes:
        assert prefix.startswith(ROOT) and prefix.endswith("/") and prefix.count("/") == 3
        assert not set("*?$") & set(prefix)


@pytest.mark.parametrize(("tenant", "owner"), CALLERS)
def test_the_key_of_a_prefix_gives_back_tenant_owner_and_filename(tenant: str, owner: str) -> None:
    prefix = prefix_for(tenant, owner)
    assert parse_key(prefix + "report.pdf") == (tenant, owner, "report.pdf")
    assert parse_key(prefix + "dir/sub/a b.txt") == (tenant, owner, "dir/sub/a b.txt")


@pytest.mark.parametrize(
    "key",
    [
        "uploads/0123/f.bin",  # not under s3/
        "s3/acme/u/",  # no filename
        "s3/acme/u",  # no filename, no slash
        "s3/acme/",
        "s3//u/f",  # empty tenant
        "s3/acme//f",  # empty owner
        "s3/user:x/u/f",  # ':' is spelled %3A
        "s3/ac%6De/u/f",  # 'm' spelled encoded: not the canonical spelling
        "s3/acme/%2e%2e/f",  # lower-case hex
        "s3/acme/../f",  # a dots-only segment is spelled %2E
        "s3/acme/%FF/f",  # not UTF-8
        "s3/acme/%2/f",  # a broken escape
        "s3/" + "a" * (MAX_SEGMENT + 1) + "/u/f",
    ],
)
def test_other_keys_are_no_caller_s(key: str) -> None:
    assert parse_key(key) is None


def test_empty_or_huge_segments_are_refused() -> None:
    with pytest.raises(ValueError):
        segment("")
    with pytest.raises(ValueError):
        prefix_for("acme", "x" * (MAX_SEGMENT + 1))


def test_the_session_policy_allows_writes_and_multipart_under_the_prefix_and_listing_inside_it() -> None:
    prefix = prefix_for("acme", "u-1")
    policy = session_policy("files-bucket", prefix, partition="aws-cn")
    assert policy == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "WriteOwnPrefix",
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                "Resource": "arn:aws-cn:s3:::files-bucket/s3/acme/u-1/*",
                "Condition": {
                    "StringEqualsIfExists": {
                        "s3:x-amz-storage-class": [
                            "STANDARD",
                            "REDUCED_REDUNDANCY",
                            "STANDARD_IA",
                            "ONEZONE_IA",
                            "INTELLIGENT_TIERING",
                            "GLACIER_IR",
                        ]
                    }
                },
            },
            {
                "Sid": "ListOwnPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": "arn:aws-cn:s3:::files-bucket",
                "Condition": {"StringLike": {"s3:prefix": "s3/acme/u-1/*"}},
            },
        ],
    }


@pytest.mark.parametrize("prefix", ["s3/acme/", "s3/acme/u", "uploads/acme/u/", "s3/acme/u/x/", "s3/ac*/u/", ""])
def test_a_session_policy_names_a_caller_s_prefix_only(prefix: str) -> None:
    with pytest.raises(ValueError):
        session_policy("b", prefix)


def test_with_the_bucket_s_key_the_session_may_use_it() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/0000"
    statements = session_policy("b", prefix_for("acme", "u"), kms_key_arn=key)["Statement"]
    assert statements[:2] == session_policy("b", prefix_for("acme", "u"))["Statement"]
    assert statements[2:] == [
        {"Sid": "BucketKey", "Effect": "Allow", "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": key}
    ]


def test_no_storage_class_whose_objects_need_a_restore_may_be_written() -> None:
    assert not {"GLACIER", "DEEP_ARCHIVE"} & set(MOVABLE_STORAGE_CLASSES)
    assert "STANDARD" in MOVABLE_STORAGE_CLASSES


def test_the_longest_caller_s_session_policy_fits_aws_s_limit() -> None:
    prefix = prefix_for("t" * 69, "%" * 128)  # longer than any caller's: 128 characters each encoded as 3
    kms = "arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/" + "0" * 36
    policy = session_policy("b" * 63, prefix, partition="aws-us-gov", kms_key_arn=kms)
    assert len(json.dumps(policy, separators=(",", ":"))) <= 2048  # STS's limit on a session policy
