"""Manage the user pool's tenants, users and admins: the local stack's (``make run``) or a deployed stack's.

  scripts/users tenant initech                      # the tenant "initech" (the group tenant-initech)
  scripts/users add dave --tenant initech           # a user of that tenant, with a temporary password
  scripts/users add erin --admin                    # an administrator (group admins)
  scripts/users admin dave                          # make an existing user an administrator
  scripts/users remove dave
  scripts/users list                                # every user: status, tenant, admin
  scripts/users --stack dfd --region eu-west-1 list         # a deployed stack (its UserPoolId output)

A new user gets a temporary password (printed, or --temporary-password): their first sign-in (the web pages, or
``scripts/token USER --new-password ...``) asks them to choose their own. No e-mail is sent (MessageAction
SUPPRESS): hand the password over yourself. Locally the pool is found on the emulator as ``scripts/token`` finds
it; on AWS from the stack's ``UserPoolId`` output (CloudFormation DescribeStacks, with --profile/--region or the
usual AWS environment). Errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import secrets
import string
import sys
from collections.abc import Iterator
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from dfd.identity.caller import ADMIN_GROUP, TENANT_GROUP_PREFIX, TENANT_NAME
from dfdtools.token import TokenError, find_local_client, local_idp, template_names
from dfdtools.tools import LOCAL_AWS, StackError, interruptible, reports_unreachable, require_output, stack_outputs


class UsersError(Exception):
    """Why the command cannot be done (one line for stderr)."""


def temporary_password() -> str:
    """16 characters meeting the template's policy (length 12+, lower, upper and digits)."""
    alphabet = string.ascii_letters + string.digits
    while True:
        password = "".join(secrets.choice(alphabet) for _ in range(16))
        if (
            any(c.islower() for c in password)
            and any(c.isupper() for c in password)
            and any(c.isdigit() for c in password)
        ):
            return password


def stack_pool(stack: str, profile: str | None, region: str | None) -> tuple[Any, str]:
    session = boto3.Session(profile_name=profile, region_name=region)
    (pool_id,) = require_output(stack_outputs(session.client("cloudformation"), stack), "UserPoolId")
    return session.client("cognito-idp"), pool_id


def local_pool(endpoint: str) -> tuple[Any, str]:
    idp = local_idp(endpoint)
    return idp, find_local_client(idp, *template_names()).user_pool_id


def tenant_group(name: str) -> str:
    if not TENANT_NAME.fullmatch(name):
        raise UsersError(f"invalid tenant name {name!r}: 1-64 lowercase letters, digits and '-', not starting with '-'")
    return TENANT_GROUP_PREFIX + name


class Users:
    def __init__(self, idp: Any, pool_id: str) -> None:
        self.idp, self.pool_id = idp, pool_id

    def create_tenant(self, name: str) -> str:
        group = tenant_group(name)
        try:
            self.idp.create_group(UserPoolId=self.pool_id, GroupName=group, Description=f"dfd tenant {name}")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "GroupExistsException":
                raise
            return f"tenant {name} exists already (group {group})"
        return f"tenant {name} created (group {group})"

    def _require_group(self, group: str, hint: str) -> None:
        try:
            self.idp.get_group(UserPoolId=self.pool_id, GroupName=group)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise UsersError(hint) from None
            raise

    def add(self, username: str, tenant: str | None, admin: bool, password: str | None, email: str | None) -> str:
        if tenant is None and not admin:
            raise UsersError("give --tenant NAME (and/or --admin): a user without a tenant sees only their own files")
        groups = [tenant_group(tenant)] if tenant is not None else []
        for group in groups:
            self._require_group(group, f"no tenant {tenant!r}: create it first with `scripts/users tenant {tenant}`")
        if admin:
            self._ensure_admin_group()
        password = password or temporary_password()
        attributes = [{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}] if email else []
        try:
            self.idp.admin_create_user(
                UserPoolId=self.pool_id,
                Username=username,
                TemporaryPassword=password,
                MessageAction="SUPPRESS",
                UserAttributes=attributes,
            )
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", str(error))
            if code == "UsernameExistsException":
                raise UsersError(f"user {username!r} exists already") from None
            if code == "InvalidPasswordException":
                raise UsersError(f"temporary password refused: {message}") from None
            raise
        for group in [*groups, *([ADMIN_GROUP] if admin else [])]:
            self.idp.admin_add_user_to_group(UserPoolId=self.pool_id, Username=username, GroupName=group)
        role = ", ".join([*(f"tenant {tenant}" for _ in groups), *(["admin"] if admin else [])])
        return (
            f"user {username} created ({role}); temporary password: {password}\n"
            f"  their first sign-in asks for a new password (web pages, or scripts/token {username} --new-password ...)"
        )

    def _ensure_admin_group(self) -> None:
        try:
            self.idp.create_group(UserPoolId=self.pool_id, GroupName=ADMIN_GROUP, Description="dfd administrators")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "GroupExistsException":
                raise

    def make_admin(self, username: str) -> str:
        self._ensure_admin_group()
        self._call_on_user(username, self.idp.admin_add_user_to_group, GroupName=ADMIN_GROUP)
        return f"user {username} is an admin"

    def remove(self, username: str) -> str:
        self._call_on_user(username, self.idp.admin_delete_user)
        return f"user {username} removed (their uploads stay, in their tenant)"

    def _call_on_user(self, username: str, call: Any, **extra: Any) -> None:
        try:
            call(UserPoolId=self.pool_id, Username=username, **extra)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "UserNotFoundException":
                raise UsersError(f"no user {username!r}") from None
            raise

    def _users(self) -> Iterator[dict[str, Any]]:
        for page in self.idp.get_paginator("list_users").paginate(UserPoolId=self.pool_id):
            yield from page["Users"]

    def _groups_of(self, username: str) -> list[str]:
        answer = self.idp.admin_list_groups_for_user(UserPoolId=self.pool_id, Username=username)
        return sorted(group["GroupName"] for group in answer["Groups"])

    def listing(self) -> list[str]:
        rows = []
        for user in sorted(self._users(), key=lambda item: str(item["Username"])):
            groups = self._groups_of(user["Username"])
            tenants = [g.removeprefix(TENANT_GROUP_PREFIX) for g in groups if g.startswith(TENANT_GROUP_PREFIX)]
            tenant = ",".join(tenants) if tenants else "-"
            admin = "admin" if ADMIN_GROUP in groups else ""
            rows.append(f"{user['Username']:<24} {user.get('UserStatus', ''):<22} {tenant:<20} {admin}".rstrip())
        header = f"{'user':<24} {'status':<22} {'tenant':<20} admin"
        return [header, *rows]


@interruptible
@reports_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/users", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--aws", action="store_true", help="a deployed stack's user pool (with --stack)")
    parser.add_argument("--stack", help="a deployed stack's name (its UserPoolId output); implies --aws")
    parser.add_argument("--profile", help="with --stack: AWS profile")
    parser.add_argument("--region", help="with --stack: the stack's region")
    parser.add_argument(
        "--endpoint-url", default=LOCAL_AWS, help=f"the local emulator (default: make run's, {LOCAL_AWS})"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    tenant = commands.add_parser("tenant", help="create a tenant (the group tenant-NAME)")
    tenant.add_argument("name")
    add = commands.add_parser("add", help="add a user with a temporary password")
    add.add_argument("username")
    add.add_argument("--tenant", help="the user's tenant (created first with `scripts/users tenant NAME`)")
    add.add_argument("--admin", action="store_true", help="also an administrator (group admins)")
    add.add_argument("--temporary-password", help="default: 16 random characters, printed")
    add.add_argument("--email", help="the user's e-mail address (marked verified; no message is sent)")
    remove = commands.add_parser("remove", help="delete a user")
    remove.add_argument("username")
    admin = commands.add_parser("admin", help="make a user an administrator")
    admin.add_argument("username")
    commands.add_parser("list", help="every user with status, tenant and admin")
    args = parser.parse_args(argv)
    if args.aws and not args.stack:
        parser.error("--aws needs --stack NAME")
    try:
        if args.stack:
            idp, pool_id = stack_pool(args.stack, args.profile, args.region)
        else:
            idp, pool_id = local_pool(args.endpoint_url)
        users = Users(idp, pool_id)
        if args.command == "tenant":
            lines = [users.create_tenant(args.name)]
        elif args.command == "add":
            lines = [users.add(args.username, args.tenant, args.admin, args.temporary_password, args.email)]
        elif args.command == "remove":
            lines = [users.remove(args.username)]
        elif args.command == "admin":
            lines = [users.make_admin(args.username)]
        else:
            lines = users.listing()
    except (UsersError, TokenError, StackError) as error:
        print(f"scripts/users: {error}", file=sys.stderr)
        return 2
    except ClientError as error:
        detail = error.response.get("Error", {})
        print(f"scripts/users: {detail.get('Code', '')}: {detail.get('Message', error)}", file=sys.stderr)
        return 2
    except BotoCoreError as error:
        if type(error).__name__ == "EndpointConnectionError":
            raise
        print(f"scripts/users: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
