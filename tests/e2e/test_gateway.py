"""The local HTTP API and Lambda Invoke API as WSGI apps with hosted test functions (no stack, no AWS); and the
running stack's routes, walked with paths no caller should send."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
import requests
from werkzeug.test import Client

from dfdlocal.apigw import HttpApi
from dfdlocal.lambda_api import LambdaApi
from dfdlocal.runtime import Runtime
from dfdlocal.template import TEMPLATE, CorsConfig, FunctionDef, HttpRoute, read_model
from tests.e2e.e2e_helpers import ROOT, RunningStack

pytestmark = pytest.mark.e2e


def function(name: str) -> FunctionDef:
    return FunctionDef(name, f"tests.{name}.handler", ".", "python3.12", 3, 128, {})


def echo(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "statusCode": 200,
        "headers": {"content-type": "application/json", "access-control-allow-origin": "https://wrong.example"},
        "body": json.dumps({"event": event, "function": context.function_name}),
    }


def boom(event: Any, context: Any) -> Any:
    raise ValueError("broken on purpose")


def make_runtime() -> Runtime:
    runtime = Runtime({}, ROOT)
    runtime.register(function("Echo"), echo)
    runtime.register(function("Boom"), boom)
    runtime.register(function("Plain"), lambda event, context: {"ok": True, "n": 1})
    runtime.register(
        function("Binary"),
        lambda event, context: {
            "statusCode": 201,
            "headers": {"x-one": 1},
            "cookies": ["a=1; Path=/", "b=2; Path=/"],
            "body": base64.b64encode(b"\x00\xffbytes").decode(),
            "isBase64Encoded": True,
        },
    )
    return runtime


CORS = CorsConfig(
    allow_origins=("https://app.example",),
    allow_methods=("GET", "POST"),
    allow_headers=("content-type",),
    expose_headers=("x-one",),
    max_age=60,
)


@pytest.fixture
def api() -> Client:
    routes = [
        HttpRoute("GET", "/items/{id}/x", "Echo", "Api"),
        HttpRoute("POST", "/items", "Echo", "Api"),
        HttpRoute("GET", "/files/{proxy+}", "Plain", "Api"),
        HttpRoute("GET", "/files/special", "Binary", "Api"),
        HttpRoute("GET", "/files/{id}", "Echo", "Api"),
        HttpRoute("ANY", "/files/{id}", "Plain", "Api"),
        HttpRoute("GET", "/boom", "Boom", "Api"),
    ]
    return Client(HttpApi(routes, {"Api": CORS}, make_runtime(), ROOT / "web"), use_cookies=False)


def event_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.get_data(as_text=True)
    document: dict[str, Any] = json.loads(response.get_data())
    return document["event"]  # type: ignore[no-any-return]


def test_payload_v2_event(api: Client) -> None:
    response = api.get(
        "/items/abc%20d/x?x=1&x=2&y=",
        headers={"X-Custom": "A", "Cookie": "a=1; b=2", "User-Agent": "tests/1.0"},
        environ_base={"REMOTE_ADDR": "192.0.2.1"},
    )
    event = event_of(response)
    assert event["version"] == "2.0"
    assert event["routeKey"] == "GET /items/{id}/x"
    assert event["rawQueryString"] == "x=1&x=2&y="
    assert event["queryStringParameters"] == {"x": "1,2", "y": ""}
    assert event["pathParameters"] == {"id": "abc d"}
    assert event["headers"]["x-custom"] == "A"
    assert "cookie" not in event["headers"]
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["isBase64Encoded"] is False
    assert "body" not in event
    http = event["requestContext"]["http"]
    assert http["method"] == "GET"
    assert http["userAgent"] == "tests/1.0"
    assert http["sourceIp"] == "192.0.2.1"
    assert event["headers"]["x-forwarded-for"] == "192.0.2.1"
    assert event["requestContext"]["routeKey"] == "GET /items/{id}/x"
    assert event["requestContext"]["stage"] == "$default"


def test_bodies_text_or_base64(api: Client) -> None:
    text = event_of(api.post("/items", json={"a": 1}))
    assert text["body"] == '{"a": 1}'
    assert text["isBase64Encoded"] is False
    binary = event_of(api.post("/items", data=b"\x00\x01", headers={"Content-Type": "application/octet-stream"}))
    assert binary["isBase64Encoded"] is True
    assert base64.b64decode(binary["body"]) == b"\x00\x01"


def test_result_mapping(api: Client) -> None:
    response = api.get("/files/special")
    assert response.status_code == 201
    assert response.get_data() == b"\x00\xffbytes"
    assert response.headers["x-one"] == "1"
    assert response.headers.getlist("set-cookie") == ["a=1; Path=/", "b=2; Path=/"]

    inferred = api.get("/files/a/b/c")  # greedy route, result without statusCode
    assert inferred.status_code == 200
    assert inferred.headers["content-type"] == "application/json"
    assert json.loads(inferred.get_data()) == {"ok": True, "n": 1}

    failed = api.get("/boom")
    assert failed.status_code == 500
    assert json.loads(failed.get_data()) == {"message": "Internal Server Error"}


def test_route_precedence(api: Client) -> None:
    assert api.get("/files/special").status_code == 201  # literal beats {id} and {proxy+}
    assert event_of(api.get("/files/abc"))["routeKey"] == "GET /files/{id}"  # method beats ANY
    assert json.loads(api.delete("/files/abc").get_data()) == {"ok": True, "n": 1}  # ANY
    assert json.loads(api.get("/files/a/b").get_data()) == {"ok": True, "n": 1}  # greedy
    missing = api.post("/files")
    assert missing.status_code == 404
    assert json.loads(missing.get_data()) == {"message": "Not Found"}


def test_cors_like_api_gateway(api: Client) -> None:
    allowed = api.options(
        "/items",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Content-Type",
        },
    )
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert allowed.headers["access-control-allow-methods"] == "GET,POST"
    assert allowed.headers["access-control-allow-headers"] == "content-type"
    assert allowed.headers["access-control-max-age"] == "60"

    for headers in (
        {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        {"Origin": "https://app.example", "Access-Control-Request-Method": "DELETE"},
        {
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-secret",
        },
    ):
        refused = api.options("/items", headers=headers)
        assert refused.status_code == 204
        assert "access-control-allow-origin" not in refused.headers

    # The function's own CORS headers are replaced by the configuration's.
    simple = api.get("/items/1/x", headers={"Origin": "https://app.example"})
    assert simple.headers["access-control-allow-origin"] == "https://app.example"
    assert simple.headers["access-control-expose-headers"] == "x-one"
    assert "origin" in simple.headers["vary"].lower()
    other = api.get("/items/1/x", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


@pytest.fixture
def invoke_api() -> Client:
    return Client(LambdaApi(make_runtime()))


def test_invoke_api(invoke_api: Client) -> None:
    path = "/2015-03-31/functions/{}/invocations"
    ok = invoke_api.post(path.format("Plain"), data=b'{"x": 1}')
    assert ok.status_code == 200
    assert json.loads(ok.get_data()) == {"ok": True, "n": 1}
    assert "x-amz-function-error" not in ok.headers

    arn = "arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3APlain"
    assert invoke_api.post(path.format(arn), data=b"{}").status_code == 200

    failed = invoke_api.post(path.format("Boom"), data=b"{}")
    assert failed.status_code == 200
    assert failed.headers["x-amz-function-error"] == "Unhandled"
    error = json.loads(failed.get_data())
    assert error["errorType"] == "ValueError"
    assert error["errorMessage"] == "broken on purpose"
    assert any("boom" in line for line in error["stackTrace"])

    missing = invoke_api.post(path.format("Nope"), data=b"{}")
    assert missing.status_code == 404
    assert missing.headers["x-amzn-errortype"] == "ResourceNotFoundException"

    assert invoke_api.post(path.format("Plain"), data=b"{not json").status_code == 400
    deep = invoke_api.post(path.format("Plain"), data=b"[" * 100_000 + b"]" * 100_000)  # a 400, never a 500
    assert deep.status_code == 400 and deep.headers["x-amzn-errortype"] == "InvalidRequestContentException"
    assert (
        invoke_api.post(path.format("Plain"), data=b"{}", headers={"X-Amz-Invocation-Type": "DryRun"}).status_code
        == 204
    )
    assert (
        invoke_api.post(path.format("Plain"), data=b"{}", headers={"X-Amz-Invocation-Type": "Event"}).status_code == 202
    )


# ---------------------------------------------------------------------------------------------- pages: headers, files
def test_pages_carry_the_security_headers(api: Client) -> None:
    for path in ("/", "/admin", "/js/common.js", "/css/style.css", "/config.js"):
        response = api.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        directives = {part.split()[0]: part.split()[1:] for part in csp.split("; ")}
        assert directives["script-src"] == ["'self'", "'wasm-unsafe-eval'"], csp  # no inline script, no eval
        assert directives["frame-ancestors"] == ["'none'"] and directives["default-src"] == ["'none'"]
        assert directives["worker-src"] == ["'self'", "blob:"] and "'self'" in directives["connect-src"]
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-content-type-options"] == "nosniff"
    for page in ("index.html", "admin.html"):  # nothing inline for the CSP to block
        html = (ROOT / "web" / page).read_text()
        assert "<script>" not in html and " on" + "click=" not in html and "javascript:" not in html


def test_the_connect_sources_are_the_stack_s() -> None:
    from dfdlocal.webheaders import page_csp, page_headers

    csp = page_headers(["http://127.0.0.1:4566/"])["Content-Security-Policy"]
    assert "connect-src 'self' http://127.0.0.1:4566;" in csp
    assert page_csp() == page_csp([]) and "connect-src 'self';" in page_csp()


@pytest.mark.parametrize(
    "path",
    [
        "/README.md",
        "/package.json",
        "/package-lock.json",
        "/vendor/README.md",
        "/vendor/uppy/LICENSE.uppy__core",
        "/vendor/uppy/versions.json",
        "/config.example.js",
        "/.gitignore",
        "/node_modules/@uppy/core/package.json",
        "/scripts/vendor.mjs",
    ],
)
def test_the_static_server_serves_only_the_app_s_files(api: Client, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404, path
    assert response.headers["content-security-policy"].startswith("default-src 'none'")


def test_api_responses_carry_the_security_headers() -> None:
    """Set by the functions themselves (dfd.core.http), so API Gateway on AWS sends them too."""
    from dfd.handlers import me, upload
    from tests.support import LambdaContext, api_event

    for response in (
        me.handler(api_event("GET", "/me"), LambdaContext()),
        upload.handler(api_event("POST", "/upload", body={"filename": "a"}), LambdaContext()),  # a 400
    ):
        headers = {name.lower(): value for name, value in response["headers"].items()}
        assert headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
        assert headers["referrer-policy"] == "no-referrer" and headers["x-content-type-options"] == "nosniff"


def test_web_readme_gives_the_same_headers_for_a_hosted_site() -> None:
    from dfdlocal.webheaders import hosted_connect_sources, page_headers

    expected = page_headers(hosted_connect_sources("https://abc123.execute-api.eu-west-1.amazonaws.com", "eu-west-1"))
    readme = (ROOT / "web" / "README.md").read_text()
    for name, value in expected.items():
        assert f"\n{name}: {value}\n" in readme, name


# NUL, control characters, escapes that are not UTF-8, a name longer than any file system's
BAD_SEGMENTS = ("a%00b", "%00", "a%01", "%7F", "%FF", "%C0%AF", "%ED%A0%80", "a" * 5000)


def test_a_page_no_file_can_be_named_is_a_404() -> None:
    client = Client(HttpApi([], {}, make_runtime(), ROOT / "web"), use_cookies=False)
    for page in ("/uploads", "/", "/index.html", "/docs", "/config.js", "/openapi.yaml", "/admin", "/%00index.html"):
        for bad in BAD_SEGMENTS:
            for method in ("GET", "HEAD"):
                response = client.open(page + bad, method=method)
                assert response.status_code == 404, (page, bad, method, response.status_code)
    assert client.get("/index.html").status_code == 200


def test_every_route_of_the_running_stack_answers_a_bad_path_with_a_4xx(stack: RunningStack) -> None:
    """The template's routes, each path parameter (and the path's end) made a bad segment, with a caller's
    token: a documented 4xx from the route's function, never a 500 (the session checks each against
    docs/openapi.yaml)."""
    routes = read_model(TEMPLATE, stack.api_url).routes
    assert routes
    auth = stack.auth("alice")
    for route in routes:
        if route.path == "$default":
            continue
        method = "GET" if route.method == "ANY" else route.method
        for bad in BAD_SEGMENTS:
            paths = {route.path.replace("{", "").replace("}", "") + bad}
            if "{" in route.path:
                paths.add(re.sub(r"\{[^}]+\}", bad, route.path))
            for path in paths:
                response = requests.request(method, stack.api_url + path, headers=auth, timeout=30)
                assert 400 <= response.status_code < 500, (route.route_key, path[:80], response.status_code)
