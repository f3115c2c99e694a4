"""Prefix-scoped S3 credentials: where a caller's S3 tools may write, and the session policy that says so.

A caller (tenant, owner) writes under ``s3/<tenant>/<owner>/``. Each of the two segments is percent-encoded
(:func:`segment`): every byte outside ``[A-Za-z0-9._-]`` becomes ``%XX``, and a segment of dots only (``.``,
``..``, which path-normalizing clients would fold) has its dots encoded too. A segment therefore never holds a
``/`` (nor an IAM wildcard ``*``/``?`` or a policy variable ``${``), so

- one caller's prefix is never a prefix of another's (both have exactly three ``/``, the last at the end);
- the encoding is one-to-one: :func:`parse_key` reads tenant and owner back from any key under ``s3/``,
  and accepts only the canonical spelling of each segment (one key, one caller).

:func:`session_policy` is the IAM policy passed to ``sts:AssumeRole`` for those credentials: the role's own
policy (template.yaml, ``S3CredentialsRole``) allows at most this on ``s3/*``, the session policy narrows it
to the caller's prefix, and the bucket policy denies the role what no session may ever do (reads, ACLs,
SSE-C, keys outside ``s3/``). Pure: no AWS call.
"""

from __future__ import annotations

import re
from typing import Any

ROOT = "s3/"  # every prefix-scoped key lives under it (the bucket policy denies the role any other key)

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ENCODED = re.compile(r"(?:[A-Za-z0-9._-]|%[0-9A-F]{2})+")
MAX_SEGMENT = 400  # encoded; a tenant (<= 69 chars) and a sub (<= 128) stay far below, S3 keys end at 1,024 bytes

# What the credentials may do under their prefix. CreateMultipartUpload, UploadPart and CompleteMultipartUpload
# are authorized as s3:PutObject by IAM; there is no IAM action of their own.
OBJECT_ACTIONS = ("s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
# `aws s3 sync` lists its destination to compare it with the source: listing is allowed, inside the prefix only
LIST_ACTION = "s3:ListBucket"
# The storage classes a write may name (x-amz-storage-class; none is STANDARD): those whose objects the drop zone's
# move reads at once with CopyObject. GLACIER and DEEP_ARCHIVE (and any class S3 adds) are refused up front: their
# objects need a restore before any copy.
MOVABLE_STORAGE_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
)


def segment(value: str) -> str:
    """One path segment of a prefix: ``value`` percent-encoded (UTF-8), never empty, never holding ``/``."""
    if not value:
        raise ValueError("a prefix segment must not be empty")
    data = value.encode()
    encoded = "".join(chr(byte) if byte in _PLAIN else f"%{byte:02X}" for byte in data)
    if set(encoded) == {"."}:
        encoded = "%2E" * len(encoded)
    if len(encoded) > MAX_SEGMENT:
        raise ValueError(f"a prefix segment is at most {MAX_SEGMENT} characters encoded")
    return encoded


def _decode(encoded: str) -> str | None:
    """The value of a canonical segment (what :func:`segment` makes), else None."""
    if not _ENCODED.fullmatch(encoded) or len(encoded) > MAX_SEGMENT:
        return None
    raw = bytearray()
    index = 0
    while index < len(encoded):
        if encoded[index] == "%":
            raw.append(int(encoded[index + 1 : index + 3], 16))
            index += 3
        else:
            raw.append(ord(encoded[index]))
            index += 1
    try:
        value = raw.decode()
    except UnicodeDecodeError:
        return None
    return value if value and segment(value) == encoded else None


def prefix_for(tenant: str, owner: str) -> str:
    """``s3/<tenant>/<owner>/``: the key prefix of one caller, unique to the (tenant, owner) pair."""
    return f"{ROOT}{segment(tenant)}/{segment(owner)}/"


def parse_key(key: str) -> tuple[str, str, str] | None:
    """(tenant, owner, filename) of a key under a caller's prefix, filename being the rest of the key (not
    empty, may hold ``/``); None for any other key, or one whose segments are not spelled as :func:`prefix_for`
    spells them."""
    if not key.startswith(ROOT):
        return None
    parts = key[len(ROOT) :].split("/", 2)
    if len(parts) != 3 or not parts[2]:
        return None
    tenant, owner = _decode(parts[0]), _decode(parts[1])
    if tenant is None or owner is None:
        return None
    return tenant, owner, parts[2]


def session_policy(bucket: str, prefix: str, partition: str = "aws", kms_key_arn: str = "") -> dict[str, Any]:
    """The session policy of one caller's credentials: write and multipart calls on ``<bucket>/<prefix>*`` (a
    write in one of :data:`MOVABLE_STORAGE_CLASSES` or naming none), and listing of the bucket with an
    ``s3:prefix`` inside the prefix; with the bucket's customer-managed key (``kms_key_arn``), the use S3 makes
    of it for these writes (the role allows it through S3 only)."""
    parsed = parse_key(prefix + "x")
    if parsed is None or prefix_for(parsed[0], parsed[1]) != prefix:
        raise ValueError(f"not a caller's prefix: {prefix!r}")
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    statements: list[dict[str, Any]] = [
        {
            "Sid": "WriteOwnPrefix",
            "Effect": "Allow",
            "Action": list(OBJECT_ACTIONS),
            "Resource": f"{bucket_arn}/{prefix}*",
            "Condition": {"StringEqualsIfExists": {"s3:x-amz-storage-class": list(MOVABLE_STORAGE_CLASSES)}},
        },
        {
            "Sid": "ListOwnPrefix",
            "Effect": "Allow",
            "Action": LIST_ACTION,
            "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": f"{prefix}*"}},
        },
    ]
    if kms_key_arn:
        # an SSE-KMS PutObject needs GenerateDataKey; CreateMultipartUpload and UploadPart need Decrypt too
        statements.append(
            {
                "Sid": "BucketKey",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                "Resource": kms_key_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}
