"""scripts/users and scripts/token against a deployed stack's user pool (moto: CloudFormation + cognito-idp):
tenants, users with a temporary password (FORCE_CHANGE_PASSWORD), the first sign-in's new password, admins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from dfdtools import token as token_tool
from dfdtools import users as users_tool
from dfdtools.token import TokenError, sign_in

STACK = "dfd-test"
REGION = "us-east-1"
# moto's CloudFormation cannot create a user pool: the stack gets the pool's id as a parameter and outputs it
TEMPLATE = {
    "Parameters": {"PoolId": {"Type": "String"}},
    "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
    "Outputs": {"UserPoolId": {"Value": {"Ref": "PoolId"}}},
}


@pytest.fixture
def pool() -> Iterator[tuple[Any, str, str]]:
    """(cognito-idp client, pool id, app client id) of a stack whose UserPoolId output names the pool."""
    with mock_aws():
        idp = boto3.client("cognito-idp", region_name=REGION)
        pool_id = idp.create_user_pool(PoolName="dfd-users")["UserPool"]["Id"]
        boto3.client("cloudformation", region_name=REGION).create_stack(
            StackName=STACK,
            TemplateBody=json.dumps(TEMPLATE),
            Parameters=[{"ParameterKey": "PoolId", "ParameterValue": pool_id}],
        )
        client_id = idp.create_user_pool_client(
            UserPoolId=pool_id,
            ClientName="web",
            ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        )["UserPoolClient"]["ClientId"]
        yield idp, pool_id, client_id


def users(*argv: str) -> int:
    return users_tool.main(["--stack", STACK, "--region", REGION, *argv])


def test_tenant_user_admin_list_remove_on_a_deployed_stack(
    pool: tuple[Any, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    idp, pool_id, client_id = pool
    assert users("tenant", "initech") == 0
    assert "tenant initech created (group tenant-initech)" in capsys.readouterr().out
    assert users("tenant", "initech") == 0
    assert "exists already" in capsys.readouterr().out
    assert users("add", "dave", "--tenant", "initech", "--temporary-password", "Temp-pass-123") == 0
    assert "temporary password: Temp-pass-123" in capsys.readouterr().out
    assert idp.admin_get_user(UserPoolId=pool_id, Username="dave")["UserStatus"] == "FORCE_CHANGE_PASSWORD"
    assert users("add", "erin", "--tenant", "initech") == 0  # a generated temporary password, printed
    printed = capsys.readouterr().out.split("temporary password: ")[1].split()[0]
    assert len(printed) == 16
    assert users("admin", "dave") == 0
    capsys.readouterr()
    assert users("list") == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows == {"dave": ["FORCE_CHANGE_PASSWORD", "initech", "admin"], "erin": ["FORCE_CHANGE_PASSWORD", "initech"]}
    # the first sign-in: the temporary password alone gets no token; with a new password it does
    with pytest.raises(TokenError, match="temporary password: choose a new one with --new-password"):
        sign_in(idp, client_id, "dave", "Temp-pass-123")
    access = sign_in(idp, client_id, "dave", "Temp-pass-123", lambda: "Chosen-pass-456")
    assert idp.get_user(AccessToken=access)["Username"] == "dave"
    assert idp.admin_get_user(UserPoolId=pool_id, Username="dave")["UserStatus"] == "CONFIRMED"
    assert sign_in(idp, client_id, "dave", "Chosen-pass-456")  # the new password from now on
    assert users("remove", "erin") == 0
    assert "user erin removed" in capsys.readouterr().out
    assert [u["Username"] for u in idp.list_users(UserPoolId=pool_id)["Users"]] == ["dave"]


def test_mistakes_are_one_line_and_exit_2(pool: tuple[Any, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert users("add", "frank", "--tenant", "nowhere") == 2
    assert capsys.readouterr().err.strip() == (
        "scripts/users: no tenant 'nowhere': create it first with `scripts/users tenant nowhere`"
    )
    assert users("tenant", "Bad_Name") == 2
    assert "invalid tenant name 'Bad_Name'" in capsys.readouterr().err
    assert users("remove", "nobody") == 2
    assert capsys.readouterr().err.strip() == "scripts/users: no user 'nobody'"
    assert users("add", "frank") == 2  # neither a tenant nor admin
    assert "give --tenant NAME" in capsys.readouterr().err
    assert users_tool.main(["--aws", "--stack", "not-there", "--region", REGION, "list"]) == 2
    assert capsys.readouterr().err.startswith("scripts/users: stack not-there: ")


def test_token_sets_the_new_password_given_on_the_command_line(
    pool: tuple[Any, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    idp, _pool_id, client_id = pool
    assert users("tenant", "initech") == 0 and users("add", "gina", "--tenant", "initech") == 0
    temporary = capsys.readouterr().out.split("temporary password: ")[1].split()[0]
    base = ["--aws", "--client-id", client_id, "--region", REGION, "gina", "--password", temporary]
    assert token_tool.main(base) == 2  # no terminal to ask on, no --new-password
    assert "--new-password" in capsys.readouterr().err
    assert token_tool.main([*base, "--new-password", "short"]) == 2
    assert "the new password is not accepted" in capsys.readouterr().err
    assert token_tool.main([*base, "--new-password", "Gina-new-pass-1"]) == 0
    access = capsys.readouterr().out.strip()
    assert idp.get_user(AccessToken=access)["Username"] == "gina"
