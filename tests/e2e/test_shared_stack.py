"""A stack bound beyond loopback (--host 0.0.0.0 --allow-remote): reached through this machine's own non-loopback
address, as another machine would, the HTTP API answers, the Lambda Invoke API is not listening, and the
emulator answers its public surface only (sign-in yes, its API with the public credentials no)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.e2e.e2e_helpers import ROOT, clean_env

pytestmark = pytest.mark.e2e


def _own_address() -> str | None:
    """This machine's address on its default route (no packet is sent), None when it has none but loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    workdir = tmp_path_factory.mktemp("shared")
    ready = workdir / "ready.json"
    ports = ["--api-port", "0", "--lambda-port", "0", "--aws-port", "0", "--ready-file", str(ready)]
    command = [sys.executable, "-m", "dfdlocal", "--host", "0.0.0.0", "--allow-remote", *ports]  # noqa: S104
    env = clean_env() | {"DFD_LOCAL_PASSWORD": "A-shared-stack-pass-7"}
    log = Path(workdir / "stack.log")
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the shared stack did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    try:
        yield json.loads(ready.read_text()) | {"log": log.read_text()}
    finally:
        process.terminate()
        process.wait(20)


def test_other_machines_reach_the_api_but_not_the_invoke_api_nor_the_emulator_api(shared: dict[str, object]) -> None:
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to come from")
    assert "other machines can reach them" in str(shared["log"])  # the warning
    port = {role: int(str(shared[f"{role}_url"]).rsplit(":", 1)[1]) for role in ("api", "aws", "lambda")}
    assert str(shared["lambda_url"]).startswith("http://127.0.0.1:")
    assert requests.get(f"http://{address}:{port['api']}/config.js", timeout=10).status_code == 200
    with pytest.raises(requests.ConnectionError):
        requests.post(f"http://{address}:{port['lambda']}/2015-03-31/functions/IngestFunction/invocations", timeout=5)
    sdk = {
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0",
        "Content-Type": "application/x-amz-json-1.0",
    }
    remote = requests.post(f"http://{address}:{port['aws']}/", data="{}", headers=sdk, timeout=10)
    assert remote.status_code == 403 and "<Code>AccessDenied</Code>" in remote.text
    local = requests.post(f"http://127.0.0.1:{port['aws']}/", data="{}", headers=sdk, timeout=10)
    assert local.status_code == 200 and "TableNames" in local.json()
    cognito = shared["cognito"]
    assert isinstance(cognito, dict)
    sign_in = requests.post(
        f"http://{address}:{port['aws']}/",
        json={
            "AuthFlow": "USER_PASSWORD_AUTH",
            "ClientId": cognito["client_id"],
            "AuthParameters": {"USERNAME": "alice", "PASSWORD": "A-shared-stack-pass-7"},
        },
        headers={
            "X-Amz-Target": "AWSCognitoIdentityProviderService.InitiateAuth",
            "Content-Type": "application/x-amz-json-1.1",
        },
        timeout=10,
    )
    assert sign_in.status_code == 200 and "AccessToken" in sign_in.json()["AuthenticationResult"], sign_in.text
