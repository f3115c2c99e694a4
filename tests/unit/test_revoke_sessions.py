"""scripts/revoke-s3-sessions (dfdtools.revokesessions): the role-wide revocation of S3 sessions — a Deny on
aws:TokenIssueTime before a date, put on S3CredentialsRole — and the local S3's guard honouring it as S3 does."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from dfd.identity.s3access import prefix_for, session_policy
from dfdlocal.s3session import IssuedSession, S3Request, allowed, evaluate
from dfdtools import revokesessions

ISSUED = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
ROLE = {"Statement": [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/s3/*"}]}


def put_by(issued: datetime) -> S3Request:
    return S3Request("s3:PutObject", "arn:aws:s3:::b/s3/t/u/f", {"aws:TokenIssueTime": revokesessions.iso(issued)})


def test_the_policy_denies_sessions_issued_before_its_date_only() -> None:
    policy = revokesessions.revocation_policy(ISSUED + timedelta(seconds=1))
    assert evaluate(policy, "s3:PutObject", "arn:aws:s3:::b/s3/t/u/f", put_by(ISSUED).context) == "Deny"
    assert evaluate(policy, "s3:ListBucket", "arn:aws:s3:::b", put_by(ISSUED).context) == "Deny"
    assert (
        evaluate(policy, "s3:PutObject", "arn:aws:s3:::b/s3/t/u/f", put_by(ISSUED + timedelta(seconds=1)).context)
        is None
    )
    session = session_policy("b", prefix_for("t", "u"))
    assert not allowed([session], [ROLE, policy], put_by(ISSUED))
    assert allowed([session], [ROLE, policy], put_by(ISSUED + timedelta(minutes=5)))
    assert allowed([session], [ROLE], put_by(ISSUED))


def test_a_session_without_an_issue_time_is_not_revoked_by_a_date_condition() -> None:
    policy = revokesessions.revocation_policy(ISSUED)
    assert evaluate(policy, "s3:PutObject", "arn:aws:s3:::b/s3/t/u/f", {}) is None  # as IAM: no key, no match
    assert IssuedSession("ASIA", "s", "t", ISSUED, "arn", None).issued is None


def test_the_command_puts_the_consoles_policy_on_the_role_and_shows_it() -> None:
    with mock_aws():
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_role(RoleName="dfd-s3-credentials-role", AssumeRolePolicyDocument="{}")
        assert revokesessions.in_force(iam, "dfd-s3-credentials-role").endswith("no S3 session is revoked")
        line = revokesessions.revoke(iam, "dfd-s3-credentials-role", ISSUED)
        assert line == "dfd-s3-credentials-role: S3 sessions issued before 2026-12-01T12:00:00Z are refused from now on"
        document = iam.get_role_policy(RoleName="dfd-s3-credentials-role", PolicyName="AWSRevokeOlderSessions")
        policy = document["PolicyDocument"]
        policy = json.loads(policy) if isinstance(policy, str) else policy
        assert policy == revokesessions.revocation_policy(ISSUED)
        later = revokesessions.revoke(iam, "dfd-s3-credentials-role", ISSUED + timedelta(hours=1))
        assert "13:00:00Z" in later  # a later revocation moves the date: one policy
        assert iam.list_role_policies(RoleName="dfd-s3-credentials-role")["PolicyNames"] == ["AWSRevokeOlderSessions"]
        assert "13:00:00Z" in revokesessions.in_force(iam, "dfd-s3-credentials-role")


def test_a_moment_must_be_iso_8601_with_its_zone() -> None:
    assert revokesessions.parse_moment("2026-12-01T12:00:00Z") == ISSUED
    for bad in ("yesterday", "2026-12-01T12:00:00"):
        with pytest.raises(argparse.ArgumentTypeError):
            revokesessions.parse_moment(bad)
