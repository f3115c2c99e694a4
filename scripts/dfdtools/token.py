"""Print an access token for USER, and nothing else on stdout: ``TOKEN=$(scripts/token alice)``.

  scripts/token alice                      # make run's user pool (password: $DFD_LOCAL_PASSWORD or its default)
  scripts/token --password 'S3cret-pass' bob
  scripts/token --aws --client-id 1example23456789 --region eu-west-1 alice   # a deployed stack (prompts)

Signs in with InitiateAuth USER_PASSWORD_AUTH. A user made with a temporary password (``scripts/users add``,
AdminCreateUser) must choose a new one at the first sign-in (the NEW_PASSWORD_REQUIRED challenge): give it with
``--new-password`` (or type it twice at the prompt); the token printed is then the new password's.

Locally the user pool and its app client are found on the
emulator (ListUserPools by the template's pool name, the newest if several; ListUserPoolClients by the
template's client name). On AWS pass the stack's ``UserPoolClientId`` output and its region. The token lasts
the client's AccessTokenValidity (1 hour locally). Errors (wrong password, unknown user, no stack) are one line
on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from dfdlocal import names
from dfdlocal.cognito import PASSWORD_ENV, cognito_definitions, local_password
from dfdlocal.template import TEMPLATE, Resolver, load_template
from dfdtools.tools import LOCAL_AWS, LOCAL_CREDENTIALS, interruptible


class TokenError(Exception):
    """Why no token can be had (one line for stderr)."""


@dataclass(frozen=True)
class LocalClient:
    user_pool_id: str
    client_id: str


def template_names() -> tuple[str, str]:
    """The user pool's and the app client's names as the local stack creates them from template.yaml."""
    template = load_template(TEMPLATE)
    definitions = cognito_definitions(template, Resolver(template, LOCAL_AWS).resolve)
    pool = str(definitions.pool.get("UserPoolName") or definitions.pool_logical_id)
    client = str(definitions.client.get("ClientName") or definitions.client_logical_id)
    return pool, client


def local_idp(endpoint: str) -> Any:
    session = boto3.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=names.REGION,
    )
    config = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    return session.client("cognito-idp", endpoint_url=endpoint, config=config)


def find_local_client(idp: Any, pool_name: str, client_name: str) -> LocalClient:
    """The newest pool named ``pool_name`` on the emulator and its client named ``client_name``."""
    pools = [
        pool
        for page in idp.get_paginator("list_user_pools").paginate(MaxResults=60)
        for pool in page["UserPools"]
        if pool.get("Name") == pool_name
    ]
    if not pools:
        raise TokenError(f"no user pool {pool_name!r} on the emulator: is this dfd's `make run`?")
    pool = max(pools, key=lambda item: item.get("CreationDate") or 0)
    clients = [
        client
        for page in idp.get_paginator("list_user_pool_clients").paginate(UserPoolId=pool["Id"], MaxResults=60)
        for client in page["UserPoolClients"]
        if client.get("ClientName") == client_name
    ]
    if len(clients) != 1:
        raise TokenError(f"user pool {pool['Id']} has {len(clients)} app clients named {client_name!r}")
    return LocalClient(str(pool["Id"]), str(clients[0]["ClientId"]))


NewPassword = Callable[[], str | None]


def no_new_password() -> str | None:
    return None


def sign_in(idp: Any, client_id: str, username: str, password: str, new_password: NewPassword = no_new_password) -> str:
    """InitiateAuth USER_PASSWORD_AUTH -> the access token (answering NEW_PASSWORD_REQUIRED with
    ``new_password()`` when it gives one)."""
    try:
        answer = idp.initiate_auth(
            AuthFlow="USER_PASSWORD_AUTH",
            ClientId=client_id,
            AuthParameters={"USERNAME": username, "PASSWORD": password},
        )
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        message = error.response.get("Error", {}).get("Message", str(error))
        if code == "UserNotFoundException":
            raise TokenError(f"no user {username!r} in the user pool") from None
        if code == "NotAuthorizedException":
            raise TokenError(f"sign-in refused for {username!r}: {message} (wrong password?)") from None
        raise TokenError(f"sign-in failed for {username!r}: {code}: {message}") from None
    result = answer.get("AuthenticationResult")
    challenge = answer.get("ChallengeName", "a challenge")
    if not result and challenge == "NEW_PASSWORD_REQUIRED":
        chosen = new_password()
        if not chosen:
            raise TokenError(
                f"{username!r} signs in with a temporary password: choose a new one with --new-password "
                "(or run this on a terminal to be asked)"
            )
        result = respond_new_password(idp, client_id, username, chosen, str(answer["Session"]))
    if not result:
        raise TokenError(f"{username!r} must first complete {challenge}, which this tool does not support")
    return str(result["AccessToken"])


LOCAL_USER = "alice"  # the user the tools sign in as on make run when given neither --token nor --user


def add_local_sign_in_args(parser: argparse.ArgumentParser) -> None:
    """--user, --password, --endpoint-url: the tools' sign-in on the local stack's user pool (without --token)."""
    parser.add_argument(
        "--user",
        help=f"without --token: sign in as this user of the local stack's user pool (default: {LOCAL_USER})",
    )
    parser.add_argument("--password", help="with --user: the password (default: $DFD_LOCAL_PASSWORD or its default)")
    parser.add_argument(
        "--endpoint-url", default=LOCAL_AWS, help=f"with --user: the local emulator (default: {LOCAL_AWS})"
    )


def local_token(user: str | None, password: str | None, endpoint_url: str) -> str:
    """An access token of ``user`` (default LOCAL_USER) signed in on the local user pool (TokenError: why not)."""
    idp = local_idp(endpoint_url)
    client = find_local_client(idp, *template_names())
    return sign_in(idp, client.client_id, user or LOCAL_USER, password if password is not None else local_password())


def respond_new_password(idp: Any, client_id: str, username: str, password: str, session: str) -> Any:
    try:
        answer = idp.respond_to_auth_challenge(
            ClientId=client_id,
            ChallengeName="NEW_PASSWORD_REQUIRED",
            Session=session,
            ChallengeResponses={"USERNAME": username, "NEW_PASSWORD": password},
        )
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        message = error.response.get("Error", {}).get("Message", str(error))
        if code == "InvalidPasswordException":
            raise TokenError(f"the new password is not accepted: {message}") from None
        raise TokenError(f"setting the new password of {username!r} failed: {code}: {message}") from None
    return answer.get("AuthenticationResult")


def asked_new_password(given: str | None) -> NewPassword:
    """``given``, else a prompt (twice) on a terminal, else nothing."""

    def ask() -> str | None:
        if given:
            return given
        if not sys.stdin.isatty():
            return None
        first = getpass.getpass("New password (the current one is temporary): ")
        if first != getpass.getpass("Repeat the new password: "):
            raise TokenError("the two new passwords differ")
        return first

    return ask


def token_for(args: argparse.Namespace) -> str:
    if args.stack:  # the app client and the Region of a deployed stack, from its outputs
        from dfdtools.tools import StackError, require_output, stack_outputs

        session = boto3.Session(region_name=args.region)
        try:
            (args.client_id,) = require_output(
                stack_outputs(session.client("cloudformation"), args.stack), "UserPoolClientId"
            )
        except StackError as error:
            raise TokenError(str(error)) from error
        args.aws, args.region = True, session.region_name
    if args.aws:
        if not args.client_id or not args.region:
            raise TokenError("--aws needs --client-id (the stack's UserPoolClientId output) and --region")
        password = args.password
        if password is None:
            if not sys.stdin.isatty():
                raise TokenError("--aws needs --password (or a terminal to prompt on)")
            password = getpass.getpass(f"Password for {args.user}: ")
        # InitiateAuth is an unauthenticated call: no AWS credentials needed.
        idp = boto3.client("cognito-idp", region_name=args.region, config=Config(signature_version=UNSIGNED))
        return sign_in(idp, args.client_id, args.user, password, asked_new_password(args.new_password))
    idp = local_idp(args.endpoint_url)
    client_id = args.client_id
    if not client_id:
        pool_name, client_name = template_names()
        client_id = find_local_client(idp, pool_name, client_name).client_id
    password = args.password if args.password is not None else local_password()
    return sign_in(idp, client_id, args.user, password, asked_new_password(args.new_password))


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/token", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("user", help="username (make run: alice, carol, bob, admin)")
    parser.add_argument(
        "--password",
        help=f"the user's password (local default: ${PASSWORD_ENV}, else make run's documented default)",
    )
    parser.add_argument(
        "--new-password",
        help="at the first sign-in of a user made with a temporary password: the new password to set "
        "(default: asked on a terminal)",
    )
    parser.add_argument(
        "--endpoint-url", default=LOCAL_AWS, help=f"the local emulator (default: make run's, {LOCAL_AWS})"
    )
    parser.add_argument("--aws", action="store_true", help="sign in with a deployed stack's user pool")
    parser.add_argument("--client-id", help="app client id (required with --aws; locally found on the emulator)")
    parser.add_argument("--region", help="the user pool's region (with --aws)")
    parser.add_argument("--stack", help="a deployed stack: its app client from its outputs; implies --aws")
    args = parser.parse_args(argv)
    try:
        token = token_for(args)
    except TokenError as error:
        print(f"scripts/token: {error}", file=sys.stderr)
        return 2
    except EndpointConnectionError as error:
        where = error.kwargs.get("endpoint_url", args.endpoint_url)
        hint = "" if args.aws else ": is `make run` running? (or pass --endpoint-url)"
        print(f"scripts/token: cannot reach {where}{hint}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"scripts/token: {error}", file=sys.stderr)
        return 2
    print(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
