"""Revoke every S3 session issued until now (or until --before): AWS's "revoke active sessions" for the role
POST /me/s3-credentials assumes (S3CredentialsRole).

  scripts/revoke-s3-sessions                                   # make run's stack
  scripts/revoke-s3-sessions --stack dfd --region eu-west-1    # a deployed stack
  scripts/revoke-s3-sessions --before 2026-12-01T12:00:00Z     # sessions issued before that moment
  scripts/revoke-s3-sessions --show                            # the date in force, if any

STS credentials cannot be recalled one by one. This puts the inline policy ``AWSRevokeOlderSessions`` on the role
(the name and statement the IAM console's "Revoke active sessions" writes): Deny ``*`` when ``aws:TokenIssueTime``
is before the date, so every session issued before it is refused from then on by S3 itself (and by the local
S3's guard), whatever its expiry. Sessions issued later work: users get new credentials as usual (their
``credential_process`` asks again). A later revocation moves the date; a deploy leaves the policy as it is
(CloudFormation manages only the role's own policies). The role is the stack's ``S3CredentialsRole`` resource
(DescribeStackResource), locally the emulator's. Errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from dfdlocal import names
from dfdtools.tools import LOCAL_AWS, LOCAL_CREDENTIALS, StackError, interruptible, reports_unreachable

POLICY_NAME = "AWSRevokeOlderSessions"  # the IAM console's name for the same policy
ROLE = "S3CredentialsRole"


def revocation_policy(before: datetime) -> dict[str, Any]:
    """Deny everything to the role's sessions issued before `before`."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RevokeOlderSessions",
                "Effect": "Deny",
                "Action": ["*"],
                "Resource": ["*"],
                "Condition": {"DateLessThan": {"aws:TokenIssueTime": iso(before)}},
            }
        ],
    }


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def revoke(iam: Any, role: str, before: datetime) -> str:
    """Puts the policy on `role`: the line to print."""
    iam.put_role_policy(RoleName=role, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(revocation_policy(before)))
    return f"{role}: S3 sessions issued before {iso(before)} are refused from now on"


def in_force(iam: Any, role: str) -> str:
    """The date the role's policy revokes sessions before, as a line to print."""
    try:
        document = iam.get_role_policy(RoleName=role, PolicyName=POLICY_NAME)["PolicyDocument"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "NoSuchEntity":
            return f"{role}: no S3 session is revoked"
        raise
    if isinstance(document, str):
        document = json.loads(document)
    dates = [
        statement["Condition"]["DateLessThan"]["aws:TokenIssueTime"]
        for statement in document.get("Statement", [])
        if "DateLessThan" in statement.get("Condition", {})
    ]
    return f"{role}: S3 sessions issued before {', '.join(dates) or '(no date)'} are refused"


def parse_moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text[:64]!r}") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError("give the time zone (e.g. 2026-12-01T12:00:00Z)")
    return moment


def role_of(stack: str, cloudformation: Any) -> str:
    """The role's name in the deployed stack."""
    try:
        found = cloudformation.describe_stack_resource(StackName=stack, LogicalResourceId=ROLE)
    except ClientError as error:
        raise StackError(f"stack {stack}: {error.response.get('Error', {}).get('Message', error)}") from error
    return str(found["StackResourceDetail"]["PhysicalResourceId"])


@interruptible
@reports_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/revoke-s3-sessions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stack", help="a deployed stack's name (its S3CredentialsRole resource)")
    parser.add_argument("--profile", help="with --stack: AWS profile")
    parser.add_argument("--region", help="with --stack: the stack's region")
    parser.add_argument(
        "--endpoint-url", default=LOCAL_AWS, help=f"the local emulator (default: make run's, {LOCAL_AWS})"
    )
    parser.add_argument("--before", type=parse_moment, help="revoke sessions issued before this (default: now)")
    parser.add_argument("--show", action="store_true", help="print the date in force and change nothing")
    args = parser.parse_args(argv)
    if args.stack:
        session = boto3.Session(profile_name=args.profile, region_name=args.region)
        iam, role = session.client("iam"), role_of(args.stack, session.client("cloudformation"))
    else:
        local = boto3.Session(
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=names.REGION,
        )
        iam, role = local.client("iam", endpoint_url=args.endpoint_url), names.role_name(ROLE)
    try:
        line = in_force(iam, role) if args.show else revoke(iam, role, args.before or datetime.now(UTC))
    except (ClientError, BotoCoreError) as error:
        if isinstance(error, ClientError):
            print(
                f"scripts/revoke-s3-sessions: {error.response.get('Error', {}).get('Message', error)}", file=sys.stderr
            )
            return 2
        raise
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
