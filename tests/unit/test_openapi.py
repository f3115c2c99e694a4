"""docs/openapi.yaml and the code describe the same API: no route, parameter, field, status or error code in one
that is not in the other.

What is compared, each side read from where it is defined:
* routes: template.yaml's HttpApi events, the handlers' ``@app.<method>(path)`` decorators, the document's
  operations; every route is behind the JWT authorizer, every operation requires the bearer scheme;
* parameters: the path's ``{name}`` segments, the query parameters a handler takes (``query_values``);
* request and response fields: the field lists of dfd.uploads.service, dfd.uploads.multipart, dfd.queries.views,
dfd.queries.service, dfd.uploads.ports;
* statuses: the ones a handler answers (``json_response(N, ...)``, ``Response(status_code=N)``, the service
  answers it passes on), the error codes dfd raises with their statuses (every ``DfdError`` built in
  functions/dfd).
The shapes themselves are checked on real answers: every e2e response and the fuzzing (tests/e2e).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from dfd.core import errors
from dfd.core.records import COUNTER_FIELDS, USAGE_FIELDS, UploadStatus, UploadVia
from dfd.identity import pats, s3credentials
from dfd.queries import views
from dfd.uploads import multipart
from dfd.uploads import service as uploads
from dfdlocal.template import read_model

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "openapi.yaml"
FUNCTIONS = ROOT / "functions"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
# Codes raised only off the HTTP API: the ingest's (an S3/SQS event, not a request) and the S3 adapter's, which
# every API caller catches (dfd.uploads.multipart turns a vanished object into upload_gone).
# Git LFS's routes speak git-lfs's wire format (docs/api/batch.md, locking.md): bodies in LFS_MEDIA, errors as
# {"message", "request_id", "documentation_url"} without a dfd error code
LFS_MEDIA = "application/vnd.git-lfs+json"
NOT_HTTP_CODES = {"invalid_event", "object_not_found", "object_changed", "object_archived"}
# API Gateway's own answers (no function runs): documented as GatewayMessage, never produced by dfd
GATEWAY = "GatewayMessage"
# the functions building a response body as a dict literal -> the schema documenting it
RESPONSE_LITERALS = {
    ("uploads/service.py", "_issue"): "SinglePutUpload",
    ("uploads/service.py", "_precheck"): "PrecheckDuplicate",
    ("uploads/multipart.py", "create"): "MultipartUpload",
    ("uploads/multipart.py", "presign_parts"): "PresignedParts",
    ("uploads/multipart.py", "list_parts"): "PartList",
    ("uploads/multipart.py", "complete"): "CompleteAnswer",
    ("queries/service.py", "download"): "Download",
    ("queries/service.py", "my_uploads"): "UploadPage",
    ("queries/service.py", "hashes"): "FilePage",
    ("queries/me.py", "me"): "Me",
    ("identity/s3credentials.py", "issue"): "S3Credentials",
}
# answered by a service the handler passes on (UploadAnswer's status)
PASSED_ON = {"create_upload": ("uploads/service.py", "UploadAnswer")}


@cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DOCUMENT.read_text())
    return loaded


def resolve(node: Any) -> Any:
    """A `$ref` of the document followed (once per level)."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = document()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def operations() -> Iterator[tuple[str, str, dict[str, Any], list[dict[str, Any]]]]:
    """(METHOD, path, operation, its parameters resolved: the path item's and its own)."""
    for path, item in document()["paths"].items():
        shared = [resolve(p) for p in item.get("parameters", [])]
        for method in METHODS:
            if method in item:
                operation = item[method]
                yield method.upper(), path, operation, shared + [resolve(p) for p in operation.get("parameters", [])]


def schema_properties(name: str) -> set[str]:
    return set(document()["components"]["schemas"][name]["properties"])


# ------------------------------------------------------------------------------------------------ the code side
class Route:
    def __init__(self, module: Path, function: ast.FunctionDef, method: str, path: str) -> None:
        self.module, self.function, self.method = module, function, method
        self.path = re.sub(r"<(\w+)>", r"{\1}", path)

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.path

    def query_parameters(self) -> set[str]:
        return {
            argument.value
            for call in ast.walk(self.function)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "query_values"
            for argument in call.args[1:]
            if isinstance(argument, ast.Constant)
        }

    def statuses(self) -> set[int]:
        found: set[int] = set()
        for call in ast.walk(self.function):
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                continue
            if call.func.id in ("json_response", "lfs_response") and isinstance(call.args[0], ast.Constant):
                found.add(call.args[0].value)
            for keyword in call.keywords:
                if call.func.id == "Response" and keyword.arg == "status_code":
                    assert isinstance(keyword.value, ast.Constant)
                    found.add(keyword.value.value)
        if self.function.name in PASSED_ON:
            module, answer = PASSED_ON[self.function.name]
            tree = ast.parse((FUNCTIONS / "dfd" / module).read_text())
            found |= {
                call.args[0].value
                for call in ast.walk(tree)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == answer
            }
        return found


def handler_routes() -> list[Route]:
    routes = []
    for module in sorted((FUNCTIONS / "dfd" / "handlers").glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr in METHODS
                    and isinstance(decorator.args[0], ast.Constant)
                ):
                    routes.append(Route(module, node, decorator.func.attr.upper(), decorator.args[0].value))
    return routes


def raised_errors() -> set[tuple[int, str]]:
    """(status, code) of every DfdError built in functions/dfd."""
    classes = {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.DfdError)
    }
    found: set[tuple[int, str]] = set()
    for module in (FUNCTIONS / "dfd").rglob("*.py"):
        for call in ast.walk(ast.parse(module.read_text())):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in classes):
                continue
            cls = classes[call.func.id]
            code = next((k.value for k in call.keywords if k.arg == "code"), None)
            if code is not None:
                assert isinstance(code, ast.Constant), f"{module}: a computed error code"
                found.add((cls.status, code.value))
            else:
                found.add((cls.status, cls.code))
    return found


def documented_errors(node: Any) -> Iterator[str]:
    """The error codes a response schema allows (every `code` enum in it), GATEWAY for API Gateway's shape."""
    if isinstance(node, dict):
        if node.get("$ref") == f"#/components/schemas/{GATEWAY}":
            yield GATEWAY
        node = resolve(node)
        code = node.get("properties", {}).get("error", {}).get("properties", {}).get("code", {})
        yield from code.get("enum", [])
        for value in node.values():
            yield from documented_errors(value)
    elif isinstance(node, list):
        for value in node:
            yield from documented_errors(value)


def documented_responses() -> Iterator[tuple[str, str, int, dict[str, Any]]]:
    for method, path, operation, _ in operations():
        for status, response in operation["responses"].items():
            yield method, path, int(status), resolve(response)


# ------------------------------------------------------------------------------------------------ the tests
def test_the_document_is_valid_openapi_3_1() -> None:
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation.validators import OpenAPIV31SpecValidator

    assert document()["openapi"].startswith("3.1.")
    validate(document(), cls=OpenAPIV31SpecValidator)


def test_routes_are_the_same_in_template_code_and_document() -> None:
    model = read_model(ROOT / "template.yaml", "http://127.0.0.1:4566")
    template = {(route.method, route.path) for route in model.routes}
    code = {route.key for route in handler_routes()}
    documented = {(method, path) for method, path, _, _ in operations()}
    assert template == code, f"template.yaml vs the handlers: {sorted(template ^ code)}"
    assert documented == template, f"docs/openapi.yaml vs template.yaml: {sorted(documented ^ template)}"
    # the handler serving a route is the function template.yaml wires to it
    for route in model.routes:
        module = model.functions[route.function].module
        assert any(r.key == (route.method, route.path) and module.endswith(r.module.stem) for r in handler_routes())


def test_routes_behind_the_jwt_authorizer_require_the_bearer_token() -> None:
    model = read_model(ROOT / "template.yaml", "http://127.0.0.1:4566")
    guarded = {(route.method, route.path) for route in model.routes if route.authorizer}
    scheme = document()["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == ("http", "bearer", "JWT")
    for method, path, operation, _ in operations():
        security = operation.get("security", document()["security"])
        assert ({"bearer": []} in security) == ((method, path) in guarded), (method, path, security)
        if security:
            assert 401 in {int(s) for s in operation["responses"]}, (method, path)
        if path.startswith("/admin/"):
            assert "forbidden" in set(documented_errors(operation["responses"]["403"])), (method, path)


def test_parameters_are_the_same_in_code_and_document() -> None:
    routes = {route.key: route for route in handler_routes()}
    for method, path, _, parameters in operations():
        documented_path = {p["name"] for p in parameters if p["in"] == "path"}
        assert documented_path == set(re.findall(r"{(\w+)}", path)), (method, path)
        assert all(p["required"] for p in parameters if p["in"] == "path"), (method, path)
        documented_query = {p["name"] for p in parameters if p["in"] == "query"}
        assert documented_query == routes[method, path].query_parameters(), (method, path)
        assert {p["in"] for p in parameters} <= {"path", "query"}, (method, path)


def test_request_fields_are_the_same_in_code_and_document() -> None:
    assert schema_properties("UploadRequest") == set(uploads._FIELDS)
    parts = document()["components"]["schemas"]["PartsRequest"]["properties"]["parts"]["items"]
    assert set(parts["properties"]) == multipart.PART_REQUEST_FIELDS
    complete = document()["components"]["schemas"]["CompleteRequest"]["oneOf"][0]["properties"]["parts"]
    assert set(complete["oneOf"][0]["items"]["properties"]) == multipart.COMPLETE_PART_FIELDS
    assert schema_properties("TokenRequest") == set(pats._FIELDS)
    assert schema_properties("S3CredentialsRequest") == set(s3credentials.BODY_FIELDS)
    bodies = {(m, p) for m, p, operation, _ in operations() if "requestBody" in operation and not p.startswith("/lfs/")}
    assert bodies == {
        ("POST", "/upload"),
        ("POST", "/uploads/{id}/parts"),
        ("POST", "/uploads/{id}/complete"),
        ("POST", "/me/tokens"),
        ("POST", "/me/s3-credentials"),
    }


def literal_keys(module: str, function: str) -> set[str]:
    """The keys of the dict literals `function` of dfd/`module` answers: returned (or passed to the returned
    call) or assigned to `body`."""
    tree = ast.parse((FUNCTIONS / "dfd" / module).read_text())
    found = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    bodies: list[ast.expr] = []
    for node in ast.walk(found):
        if isinstance(node, ast.Return) and node.value is not None:
            bodies += [node.value, *(node.value.args if isinstance(node.value, ast.Call) else [])]
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "body" for t in node.targets):
            bodies.append(node.value)
    return {
        key.value for body in bodies if isinstance(body, ast.Dict) for key in body.keys if isinstance(key, ast.Constant)
    }


@pytest.mark.parametrize(
    ("where", "schema"), RESPONSE_LITERALS.items(), ids=lambda v: "/".join(v) if isinstance(v, tuple) else v
)
def test_response_bodies_built_in_code_match_their_schema(where: tuple[str, str], schema: str) -> None:
    assert literal_keys(*where) == schema_properties(schema)


def test_response_fields_are_the_same_in_code_and_document() -> None:
    assert schema_properties("File") == set(views._FILE_FIELDS)
    assert schema_properties("Upload") == {*views._UPLOAD_FIELDS, "file"}
    assert schema_properties("UploadListItem") == set(views._LISTED)
    assert schema_properties("Stats") == {*COUNTER_FIELDS, "dedup_ratio"}
    assert set(schema_properties("Me")) >= {"usage", "limits"}
    usage = document()["components"]["schemas"]["Me"]["properties"]["usage"]
    assert set(usage["properties"]) == set(USAGE_FIELDS)


def test_upload_status_and_via_take_the_values_of_the_code() -> None:
    """An upload's `status` and `via` take exactly the values of their enums (dfd.core.records)."""
    schemas = document()["components"]["schemas"]
    assert set(schemas["UploadStatus"]["enum"]) == {status.value for status in UploadStatus}
    assert set(schemas["UploadVia"]["enum"]) == {via.value for via in UploadVia}
    for name in ("Upload", "UploadListItem"):
        assert schemas[name]["properties"]["via"] == {"$ref": "#/components/schemas/UploadVia"}


@pytest.mark.parametrize("route", handler_routes(), ids=lambda route: " ".join(route.key))
def test_success_statuses_are_the_same_in_code_and_document(route: Route) -> None:
    documented = {status for method, path, status, _ in documented_responses() if (method, path) == route.key}
    answered = route.statuses()
    assert answered, f"{route.key}: no status found in {route.module.name}"
    assert answered <= documented, f"{route.key} answers {sorted(answered - documented)}: not documented"
    successes = {status for status in documented if status < 400}
    assert successes <= answered, f"{route.key}: documented {sorted(successes - answered)}, never answered"


def test_error_codes_are_the_same_in_code_and_document() -> None:
    raised = {(status, code) for status, code in raised_errors() if status < 500 or status in (502, 503)}
    raised = {(status, code) for status, code in raised if code not in NOT_HTTP_CODES}
    documented: set[tuple[int, str]] = set()
    for method, path, status, response in documented_responses():
        shapes = set(documented_errors(response))
        codes = shapes - {GATEWAY}
        if path.startswith("/lfs/"):  # git-lfs's errors carry no dfd code
            assert resolve(response)["content"][LFS_MEDIA], (method, path, status)
            continue
        if status >= 400 and not (status == 409 and method == "POST" and path == "/upload"):
            assert shapes, f"{method} {path} {status}: no error code documented"
        documented |= {(status, code) for code in codes}
    assert documented <= raised, f"documented but never raised with that status: {sorted(documented - raised)}"
    assert raised <= documented, f"raised but not documented: {sorted(raised - documented)}"


def conforms(example: Any, schema: dict[str, Any]) -> None:
    """Validate `example` against `schema`, its `#/components/...` references resolved in the document."""
    validator = Draft202012Validator({**schema, "components": document()["components"]})
    errors_found = sorted(str(error.message) for error in validator.iter_errors(example))
    assert not errors_found, errors_found


def test_every_success_has_an_example_that_fits_its_schema() -> None:
    for method, path, status, response in documented_responses():
        if status < 400 and "content" in response:
            media = response["content"].get("application/json") or response["content"][LFS_MEDIA]
            assert "example" in media, (method, path, status)
            conforms(media["example"], media["schema"])


def test_request_examples_fit_their_schema() -> None:
    for _, _, operation, _ in operations():
        if "requestBody" in operation:
            content = operation["requestBody"]["content"]
            if LFS_MEDIA in content:  # git-lfs's request bodies: their schemas document them
                if "example" in content[LFS_MEDIA]:
                    conforms(content[LFS_MEDIA]["example"], content[LFS_MEDIA]["schema"])
                continue
            media = content["application/json"]
            conforms(media["example"], media["schema"])
