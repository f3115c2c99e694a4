"""scripts/s3-credentials (dfdtools.s3credentials): POST /me/s3-credentials with the token given (or $DFD_TOKEN),
the answer printed as credential_process reads it, nothing on stdout and exit status 2 on a refusal."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import requests

from dfdtools import s3credentials

ANSWER = {
    "Version": 1,
    "AccessKeyId": "ASIAEXAMPLE",
    "SecretAccessKey": "secret",
    "SessionToken": "token",
    "Expiration": "2030-01-01T00:00:00Z",
    "bucket": "b",
    "prefix": "s3/acme/u/",
    "region": "us-east-1",
    "endpoint_url": None,
}


class Answer:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code = status
        self._body = body
        self.text = json.dumps(body) if body is not None else "<html>"

    def json(self) -> Any:
        if self._body is None:
            raise ValueError("not JSON")
        return self._body


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    monkeypatch.delenv("DFD_TOKEN", raising=False)

    def post(url: str, **kwargs: Any) -> Answer:
        made.append({"url": url, **kwargs})
        return Answer(201, ANSWER)

    monkeypatch.setattr(requests, "post", post)
    return made


def test_the_answer_is_printed_with_the_token_sent(
    calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert s3credentials.main(["--api", "https://api.example/", "--token", "dfd_pat_x", "--duration", "900"]) == 0
    assert json.loads(capsys.readouterr().out) == ANSWER
    (call,) = calls
    assert call["url"] == "https://api.example/me/s3-credentials"
    assert call["headers"] == {"Authorization": "Bearer dfd_pat_x"}
    assert call["json"] == {"duration_seconds": 900}


def test_dfd_token_is_the_default_token(
    calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DFD_TOKEN", "from-env")
    assert s3credentials.main(["--api", "https://api.example"]) == 0
    assert calls[0]["headers"] == {"Authorization": "Bearer from-env"} and calls[0]["json"] == {}


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (Answer(401, {"error": {"code": "unauthorized", "message": "the access token is not valid"}}), "not valid"),
        (Answer(403, {"message": "Forbidden"}), "Forbidden"),
        (Answer(502, None), "<html>"),
    ],
)
def test_a_refusal_is_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answer: Answer, shown: str
) -> None:
    monkeypatch.setattr(requests, "post", lambda url, **kwargs: answer)
    assert s3credentials.main(["--api", "https://api.example", "--token", "t"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("scripts/s3-credentials: /me/s3-credentials answered") and shown in err
    assert len(err.strip().splitlines()) == 1


def test_an_unreachable_api_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def down(url: str, **kwargs: Any) -> Any:
        raise requests.ConnectionError("refused")

    monkeypatch.setattr(requests, "post", down)
    assert s3credentials.main(["--api", "http://127.0.0.1:9", "--token", "t"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "cannot reach http://127.0.0.1:9" in err


def test_token_and_user_are_exclusive(calls: list[dict[str, Any]]) -> None:
    with pytest.raises(SystemExit) as stopped:
        s3credentials.main(["--token", "t", "--user", "bob"])
    assert stopped.value.code == 2
    assert calls == []


def test_the_profile_makes_botocore_run_the_command_for_its_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the AWS CLI does with the README's profile (botocore resolves a profile's credential_process): the
    command runs, word for word (a path with a space included), and its answer is the credentials."""
    answer = json.dumps({k: ANSWER[k] for k in ("Version", "AccessKeyId", "SecretAccessKey", "SessionToken")})
    script = tmp_path / "a dir" / "creds.py"
    script.parent.mkdir()
    script.write_text(f"print({answer!r})\n")
    env = s3credentials.aws_profile(
        tmp_path / "aws", [sys.executable, str(script)], region="eu-west-1", endpoint_url="http://127.0.0.1:4566"
    )
    assert env == {
        "AWS_CONFIG_FILE": str(tmp_path / "aws" / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws" / "credentials"),
        "AWS_PROFILE": "dfd",
    }
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    session = botocore.session.Session()
    credentials = session.get_credentials()
    assert credentials is not None
    assert (credentials.access_key, credentials.token, credentials.method) == ("ASIAEXAMPLE", "token", "custom-process")
    assert session.get_config_variable("region") == "eu-west-1"
    assert session.get_scoped_config()["endpoint_url"] == "http://127.0.0.1:4566"


def test_a_profile_without_an_endpoint_names_none(tmp_path: Path) -> None:
    s3credentials.aws_profile(tmp_path, ["scripts/s3-credentials"], region="us-east-1", endpoint_url=None, name="aws")
    assert (tmp_path / "config").read_text().split() == [
        "[profile", "aws]", "credential_process", "=", "scripts/s3-credentials", "region", "=", "us-east-1",
    ]  # fmt: skip
    assert not (tmp_path / "credentials").exists()
