"""Print temporary S3 credentials for your own prefix (POST /me/s3-credentials), as the AWS CLI's
``credential_process`` reads them, and nothing else on stdout:

  scripts/s3-credentials                                  # as alice on make run's stack
  scripts/s3-credentials --user bob --duration 900        # another local user ($DFD_LOCAL_PASSWORD)
  scripts/s3-credentials --api https://abc.execute-api.eu-west-1.amazonaws.com --token "$DFD_TOKEN"

In ``~/.aws/config``, ``credential_process = /path/to/scripts/s3-credentials --user alice`` makes ``aws s3 cp``,
``aws s3 sync`` and every SDK use them (they are asked for again before they expire). The JSON also names where to
write: ``bucket``, ``prefix`` (``s3/<tenant>/<user>/``, the only place the credentials may write), ``region`` and
``endpoint_url`` (make run's S3; null on AWS).

The request carries ``Authorization: Bearer <token>``: ``--token`` (or ``$DFD_TOKEN``), an access token or a
personal access token (``POST /me/tokens``: it lasts up to a year, an access token one hour); else a token
signed in as ``--user`` (default ``alice``) on the local user pool, as ``scripts/token USER`` does. Errors are
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import requests
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from dfdtools.token import TokenError, add_local_sign_in_args, local_token
from dfdtools.tools import LOCAL_API, interruptible

TOKEN_ENV = "DFD_TOKEN"  # noqa: S105 - the variable's name
ROUTE = "/me/s3-credentials"
TIMEOUT = (5, 30)  # connect, read (seconds)


def aws_profile(
    directory: Path, command: Sequence[str], *, region: str, endpoint_url: str | None, name: str = "dfd"
) -> dict[str, str]:
    """The README's profile in ``directory/config``: credentials from ``command`` (``credential_process``, e.g.
    this script with its options), ``region`` and, locally, ``endpoint_url``. Returned: the variables under which
    the AWS CLI, the SDKs and rclone (``env_auth``) use that profile and no other credentials (the shared
    credentials file named is ``directory/credentials``, which this does not write)."""
    config = configparser.ConfigParser(interpolation=None)
    section = f"profile {name}"
    config[section] = {"credential_process": shlex.join(command), "region": region}
    if endpoint_url:
        config[section]["endpoint_url"] = endpoint_url
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "config").open("w", encoding="utf-8") as handle:
        config.write(handle)
    return {
        "AWS_CONFIG_FILE": str(directory / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(directory / "credentials"),
        "AWS_PROFILE": name,
    }


class CredentialsError(Exception):
    """Why no credentials were had (one line for stderr)."""


def fetch(api: str, token: str, duration: int | None) -> dict[str, object]:
    """POST /me/s3-credentials: the answer, or CredentialsError with the API's message."""
    body = {} if duration is None else {"duration_seconds": duration}
    try:
        response = requests.post(
            api.rstrip("/") + ROUTE, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )
    except requests.RequestException as error:
        raise CredentialsError(
            f"cannot reach {api}: {type(error).__name__} (is `make run` running? or --api)"
        ) from None
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code != 201 or not isinstance(answer, dict):
        raise CredentialsError(f"{ROUTE} answered {response.status_code}: {_message(answer, response.text)}")
    return answer


def _message(answer: object, text: str) -> str:
    """The error's message: dfd's ``{"error": {"message"}}``, API Gateway's ``{"message"}``, else the text."""
    if isinstance(answer, dict):
        error = answer.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if answer.get("message"):
            return str(answer["message"])
    return text[:200]


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/s3-credentials", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--api", default=LOCAL_API, help=f"API base URL (default: make run's, {LOCAL_API})")
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV) or None,
        help=f"access token or personal access token to send (default: ${TOKEN_ENV})",
    )
    add_local_sign_in_args(parser)
    parser.add_argument(
        "--duration", type=int, help="seconds the credentials last, 900 to 3600 (default: the API's, 3600)"
    )
    args = parser.parse_args(argv)
    if args.token and args.user:
        parser.error("give --token or --user, not both")
    try:
        token = args.token or local_token(args.user, args.password, args.endpoint_url)
        answer = fetch(args.api, token, args.duration)
    except (TokenError, CredentialsError) as error:
        print(f"scripts/s3-credentials: {error}", file=sys.stderr)
        return 2
    except EndpointConnectionError as error:  # the local sign-in
        print(
            f"scripts/s3-credentials: cannot reach {error.kwargs.get('endpoint_url')}: is `make run` running?",
            file=sys.stderr,
        )
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"scripts/s3-credentials: {error}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
