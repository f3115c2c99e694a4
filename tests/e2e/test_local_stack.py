"""The local stack (`make run`) over HTTP: resources from the template, routing, CORS, invoke API, ingest."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from botocore.exceptions import ClientError

from dfdlocal import names
from dfdlocal.stack import local_users_hint
from dfdlocal.template import load_template
from tests.e2e.e2e_helpers import ROOT, RunningStack, wait_until

pytestmark = pytest.mark.e2e

BROWSER_ORIGIN = "http://localhost:5173"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(ROOT / "template.yaml")


def parameter_default(template: dict[str, Any], value: Any) -> Any:
    """A literal, or the Default of the parameter a ``!Ref`` names."""
    if isinstance(value, dict) and "Ref" in value:
        default = template["Parameters"][value["Ref"]]["Default"]
        kind = template["Parameters"][value["Ref"]].get("Type", "String")
        return default.split(",") if kind == "CommaDelimitedList" else default
    return value


def resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: res["Properties"] for lid, res in template["Resources"].items() if res["Type"] == kind}


def allowed_origin(template: dict[str, Any], origins: Any) -> str:
    values = parameter_default(template, origins)
    return BROWSER_ORIGIN if "*" in values else values[0]


# ------------------------------------------------------------------------------------------------
# Resources are the template's
# ------------------------------------------------------------------------------------------------
def test_tables_match_template(stack: RunningStack, template: dict[str, Any]) -> None:
    dynamodb = stack.client("dynamodb")
    tables = resources_of(template, "AWS::DynamoDB::Table")
    assert set(tables) == set(stack.description["tables"])
    assert {
        stack.files_table,
        stack.counters_table,
        stack.uploads_table,
        stack.events_table,
        stack.tenant_files_table,
        stack.description["tables"]["LfsTokensTable"],
        stack.description["tables"]["LfsLocksTable"],
        stack.description["tables"]["StatsHistoryTable"],
    } == set(names.TABLES.values())
    for logical_id, props in tables.items():
        name = stack.description["tables"][logical_id]
        table = dynamodb.describe_table(TableName=name)["Table"]
        assert table["KeySchema"] == props["KeySchema"], logical_id
        assert sorted(table["AttributeDefinitions"], key=str) == sorted(props["AttributeDefinitions"], key=str)
        expected_gsis = {g["IndexName"]: g["KeySchema"] for g in props.get("GlobalSecondaryIndexes", [])}
        actual_gsis = {g["IndexName"]: g["KeySchema"] for g in table.get("GlobalSecondaryIndexes", [])}
        assert actual_gsis == expected_gsis, logical_id
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if "TimeToLiveSpecification" in props:
            assert ttl["TimeToLiveStatus"] == "ENABLED"
            assert ttl["AttributeName"] == props["TimeToLiveSpecification"]["AttributeName"]
        else:
            assert ttl["TimeToLiveStatus"] == "DISABLED"


def test_bucket_notification_and_cors_match_template(stack: RunningStack, template: dict[str, Any]) -> None:
    s3, sqs = stack.client("s3"), stack.client("sqs")
    (props,) = resources_of(template, "AWS::S3::Bucket").values()
    assert stack.bucket == names.BUCKET

    expected = props["NotificationConfiguration"]["QueueConfigurations"]  # the upload prefix, the drop zone's s3/
    actual = s3.get_bucket_notification_configuration(Bucket=stack.bucket)["QueueConfigurations"]
    ingest_arn = sqs.get_queue_attributes(QueueUrl=stack.ingest_queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    assert len(actual) == len(expected) == 2
    for want, got in zip(expected, actual, strict=True):
        assert got["QueueArn"] == ingest_arn
        assert got["Events"] == [want["Event"]]
        rules = [
            {"Name": rule["Name"], "Value": parameter_default(template, rule["Value"])}
            for rule in want["Filter"]["S3Key"]["Rules"]
        ]
        assert got["Filter"]["Key"]["FilterRules"] == rules

    (cors_expected,) = props["CorsConfiguration"]["CorsRules"]
    (cors_actual,) = s3.get_bucket_cors(Bucket=stack.bucket)["CORSRules"]
    assert cors_actual["AllowedMethods"] == cors_expected["AllowedMethods"]
    assert cors_actual["AllowedOrigins"] == parameter_default(template, cors_expected["AllowedOrigins"])
    assert cors_actual["ExposeHeaders"] == cors_expected["ExposedHeaders"]


def test_queue_redrive_matches_template_with_short_local_visibility(
    stack: RunningStack, template: dict[str, Any]
) -> None:
    sqs = stack.client("sqs")
    queues = resources_of(template, "AWS::SQS::Queue")
    (ingest_id,) = [lid for lid, props in queues.items() if "RedrivePolicy" in props]
    expected = queues[ingest_id]["RedrivePolicy"]
    assert "ingest" in stack.ingest_queue_url.rsplit("/", 1)[1]
    assert "dlq" in stack.dlq_url.rsplit("/", 1)[1]

    attributes = sqs.get_queue_attributes(QueueUrl=stack.ingest_queue_url, AttributeNames=["All"])["Attributes"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": expected["maxReceiveCount"]}
    assert attributes["VisibilityTimeout"] == "2"  # local: failed records retry after seconds
    assert attributes["MessageRetentionPeriod"] == str(queues[ingest_id]["MessageRetentionPeriod"])


# ------------------------------------------------------------------------------------------------
# HTTP API: routes, 404, CORS, static files
# ------------------------------------------------------------------------------------------------
def test_unknown_route_is_api_gateway_404(stack: RunningStack) -> None:
    for method, path in (("GET", "/nope"), ("POST", "/nope/deeper"), ("DELETE", "/upload"), ("PUT", "/")):
        response = requests.request(method, stack.api_url + path, timeout=10)
        assert response.status_code == 404, (method, path)
        assert response.json() == {"message": "Not Found"}


def test_api_preflight_follows_cors_configuration(stack: RunningStack, template: dict[str, Any]) -> None:
    cors = template["Resources"]["HttpApi"]["Properties"]["CorsConfiguration"]
    origin = allowed_origin(template, cors["AllowOrigins"])
    response = requests.options(
        stack.api_url + "/upload",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
        timeout=10,
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] in ("*", origin)
    assert "POST" in response.headers["access-control-allow-methods"].split(",")
    assert "content-type" in response.headers["access-control-allow-headers"].split(",")
    assert response.headers["access-control-max-age"] == str(cors["MaxAge"])

    refused = requests.options(
        stack.api_url + "/upload",
        headers={"Origin": origin, "Access-Control-Request-Method": "PUT"},  # not in AllowMethods
        timeout=10,
    )
    assert refused.status_code == 204
    assert "access-control-allow-origin" not in refused.headers

    simple = requests.get(stack.api_url + "/admin/stats", headers={"Origin": origin, **stack.auth("admin")}, timeout=10)
    assert simple.status_code == 200, simple.text
    assert simple.headers["access-control-allow-origin"] in ("*", origin)


def test_presigned_put_preflight_uses_bucket_cors(stack: RunningStack, template: dict[str, Any]) -> None:
    (props,) = resources_of(template, "AWS::S3::Bucket").values()
    (rule,) = props["CorsConfiguration"]["CorsRules"]
    origin = allowed_origin(template, rule["AllowedOrigins"])
    url = f"{stack.aws_url}/{stack.bucket}/uploads/0123456789abcdef0123456789abcdef"
    response = requests.options(
        url,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "content-type,if-none-match,x-amz-checksum-sha256",
        },
        timeout=10,
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] in ("*", origin)
    assert "PUT" in [m.strip() for m in response.headers["access-control-allow-methods"].split(",")]
    assert response.headers["access-control-max-age"] == str(rule["MaxAge"])

    # moto checks only the Origin of a preflight (real S3 also answers 403 to a method or header outside
    # the rule); a browser still refuses what Access-Control-Allow-Methods does not list.
    assert "DELETE" not in response.headers["access-control-allow-methods"]
    if "*" not in parameter_default(template, rule["AllowedOrigins"]):
        refused = requests.options(
            url, headers={"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "PUT"}, timeout=10
        )
        assert refused.status_code == 403


def test_static_pages_and_config(stack: RunningStack) -> None:
    config = requests.get(stack.api_url + "/config.js", timeout=10)
    assert config.status_code == 200
    auth = {"endpoint": stack.aws_url + "/", "clientId": stack.cognito["client_id"], "region": stack.region}
    auth["hint"] = local_users_hint(stack.users, stack.password)  # the sign-in form's line: local stack only
    assert config.text.strip() == f"window.DFD_CONFIG = {json.dumps({'apiBase': '', 'auth': auth})};"
    assert "alice, carol (tenant acme)" in auth["hint"] and "admin (admin)" in auth["hint"]
    assert config.headers["content-type"].startswith("text/javascript")
    for path, page in (("/", "index.html"), ("/admin", "admin.html")):
        if not (ROOT / "web" / page).is_file():
            continue
        response = requests.get(stack.api_url + path, timeout=10)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert response.content == (ROOT / "web" / page).read_bytes()
    assert requests.get(stack.api_url + "/missing.css", timeout=10).status_code == 404

    host, port = urlsplit(stack.api_url).netloc.split(":")
    for raw in ("/../template.yaml", "/%2e%2e/template.yaml", "/..%2ftemplate.yaml", "/.gitignore"):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", raw)  # sent as is: no client-side normalization
        assert connection.getresponse().status == 404, raw
        connection.close()


# ------------------------------------------------------------------------------------------------
# Lambda Invoke API
# ------------------------------------------------------------------------------------------------
def test_lambda_invoke_round_trip(stack: RunningStack) -> None:
    client = stack.lambda_client()
    event = {
        "Records": [
            {"eventSource": "aws:s3", "s3": {"bucket": {"name": stack.bucket}, "object": {"key": "uploads/none"}}}
        ]
    }
    response = client.invoke(FunctionName="IngestFunction", Payload=json.dumps(event).encode())
    assert response["StatusCode"] == 200
    assert "FunctionError" not in response
    assert isinstance(json.loads(response["Payload"].read()), dict)

    arn = f"arn:aws:lambda:{stack.region}:123456789012:function:IngestFunction"
    assert client.invoke(FunctionName=arn, Payload=json.dumps(event).encode())["StatusCode"] == 200

    with pytest.raises(ClientError) as raised:
        client.invoke(FunctionName="NoSuchFunction", Payload=b"{}")
    assert raised.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_invoke_with_the_aws_cli(stack: RunningStack, tmp_path: Any) -> None:
    try:
        version = subprocess.run(["aws", "--version"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("aws CLI not installed")
    flags = ["--cli-binary-format", "raw-in-base64-out"] if "aws-cli/2" in version.stdout + version.stderr else []
    out = tmp_path / "out.json"
    result = subprocess.run(
        [
            "aws",
            "lambda",
            "invoke",
            "--endpoint-url",
            stack.lambda_url,
            "--function-name",
            "IngestFunction",
            *flags,
            "--payload",
            f"file://{ROOT / 'events' / 's3-put.json'}",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            **names.CREDENTIALS,
            "AWS_DEFAULT_REGION": names.REGION,
        },
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["StatusCode"] == 200
    assert isinstance(json.loads(out.read_text()), dict)


# ------------------------------------------------------------------------------------------------
# The whole flow: POST /upload -> presigned PUT -> S3 -> SQS -> IngestFunction -> stored
# ------------------------------------------------------------------------------------------------
def test_upload_is_ingested(stack: RunningStack, template: dict[str, Any]) -> None:
    body = b"e2e local stack upload\n"
    created = requests.post(
        stack.api_url + "/upload",
        json={"filename": "e2e.txt", "size": len(body), "content_type": "text/plain"},
        headers=stack.auth("alice"),
        timeout=10,
    )
    assert created.status_code == 201, created.text
    upload = created.json()
    assert upload["upload_url"].startswith(stack.aws_url + "/")

    (props,) = resources_of(template, "AWS::S3::Bucket").values()
    origin = allowed_origin(template, props["CorsConfiguration"]["CorsRules"][0]["AllowedOrigins"])
    signed_headers = {k.lower(): v for k, v in upload.get("headers", {}).items()}
    browser_headers = sorted(set(signed_headers) - {"content-length", "host"})
    preflight = requests.options(  # what a browser sends first, to the presigned URL itself
        upload["upload_url"],
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": ",".join(browser_headers),
        },
        timeout=10,
    )
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] in ("*", origin)
    if "content-type" in signed_headers:  # the emulator checks presigned signatures as S3 does
        tampered = requests.put(
            upload["upload_url"],
            data=body,
            headers={**signed_headers, "content-type": "application/x-other", "Origin": origin},
            timeout=10,
        )
        assert tampered.status_code == 403, tampered.text
        assert "SignatureDoesNotMatch" in tampered.text
    put = requests.request(
        upload.get("method", "PUT"),
        upload["upload_url"],
        data=body,
        headers={**upload.get("headers", {}), "Origin": origin},
        timeout=10,
    )
    assert put.status_code == 200, put.text
    assert put.headers["access-control-allow-origin"] in ("*", origin)
    assert "ETag" in put.headers["access-control-expose-headers"]

    def stored() -> dict[str, Any] | None:
        status = requests.get(f"{stack.api_url}/metadata/{upload['upload_id']}", headers=stack.auth(), timeout=10)
        document: dict[str, Any] = status.json()
        return document if status.status_code == 200 and document.get("status") == "stored" else None

    document = wait_until(stored, timeout=20)
    assert document["upload_id"] == upload["upload_id"]

    download = requests.get(f"{stack.api_url}/download/{upload['upload_id']}", headers=stack.auth(), timeout=10)
    assert download.status_code == 200, download.text
    fetched = requests.get(download.json()["download_url"], headers={"Origin": origin}, timeout=10)
    assert fetched.status_code == 200, fetched.text
    assert fetched.content == body

    # the file is listed by /admin/hashes (paged with the opaque token) and counted by /admin/stats
    digest = document["hash"]
    listed: list[str] = []
    token: str | None = None
    for _ in range(1000):
        query = {"limit": "1", **({"last_evaluated_key": token} if token else {})}
        page = requests.get(f"{stack.api_url}/admin/hashes", params=query, headers=stack.auth("admin"), timeout=10)
        assert page.status_code == 200, page.text
        listed += [item["hash"] for item in page.json()["items"]]
        token = page.json()["last_evaluated_key"]
        if token is None:
            break
    assert digest in listed and len(listed) == len(set(listed))
    stats = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=10).json()
    assert stats["total_files"] == len(listed)

    # Every S3 path is ingested alike: an object written with the plain SDK lands in the same table.
    s3 = stack.client("s3")
    s3.put_object(Bucket=stack.bucket, Key="uploads/e2e-sdk-object", Body=b"written with the SDK\n")
    dynamodb = stack.client("dynamodb")
    wait_until(
        lambda: any(
            item["s3_key"]["S"] == "uploads/e2e-sdk-object"
            for item in dynamodb.scan(TableName=stack.files_table)["Items"]
        ),
        timeout=20,
    )
    sqs = stack.client("sqs")
    attributes = sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0", stack.logs()


# ------------------------------------------------------------------------------------------------
# Start-up errors
# ------------------------------------------------------------------------------------------------
def test_port_in_use_exits_2_with_a_clear_message() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "dfdlocal", "--api-port", str(port), "--lambda-port", "0", "--aws-port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
    assert result.returncode == 2
    assert f"port {port}" in result.stderr
    assert "--api-port" in result.stderr
    assert "Traceback" not in result.stderr
