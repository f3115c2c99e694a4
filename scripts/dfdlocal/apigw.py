"""The HTTP API: the template's routes as API Gateway HTTP API payload v2 events, CORS, and the web pages.

What API Gateway does and this mirrors:
- routing: the most specific route wins (literal segments over ``{param}`` over ``{proxy+}``, a method over
  ``ANY``), then ``$default``; no match -> 404 ``{"message":"Not Found"}``;
- the v2 event: lower-cased headers (repeated values comma-joined, ``cookie`` moved to ``cookies``),
  ``queryStringParameters`` (repeated values comma-joined), ``pathParameters``, body base64-encoded unless
  it is text;
- the v2 response: ``statusCode``/``headers``/``body``/``isBase64Encoded``/``cookies``; a result without
  ``statusCode`` is sent as a 200 JSON body; a failed invocation is a 500 ``Internal Server Error``;
- CORS from the HttpApi CorsConfiguration: preflights are answered without calling a function (204), the
  ``access-control-*`` headers of allowed origins replace whatever the function returned.

- JWT authorizers (the template's HttpApi ``Auth``): a route guarded by one gets its token from the identity
  source header (``Bearer <jwt>`` or the bare token), verified by :class:`dfdlocal.jwtauth.JwtVerifier`
  (signature against the issuer's JWKS, ``iss``, ``aud``/``client_id``, ``exp``/``nbf``). No token or an invalid
  one -> 401 ``{"message":"Unauthorized"}`` (an invalid one with ``www-authenticate: Bearer scope="" error=
  "invalid_token"``, as in API Gateway's troubleshooting guide); a valid token with none of the route's scopes
  -> 403 ``{"message":"Forbidden"}`` (``error="insufficient_scope"``). The function is not called then. A
  passed request carries ``requestContext.authorizer.jwt = {"claims": <every claim as a string, arrays as
  "[a b]">, "scopes": <the route's scopes the token has, null when the route requires none>}``.
  Preflights are answered before any authorizer (as API Gateway does), static pages and /config.js are open.

Not an API route and a GET/HEAD: a static file from ``web/`` (``/`` -> index.html, ``/admin`` -> admin.html,
``/docs`` -> docs.html, the API reference), plus the generated ``/config.js`` telling the pages to call this same
origin (and, with a user pool, where to sign in: :func:`config_js`) and the API's OpenAPI document
(docs/openapi.yaml) at ``/openapi.yaml``. A path no file can have (a NUL or another control character, a name
the file system refuses) is a 404 like any page that is not there.
"""

from __future__ import annotations

import base64
import json
import logging
import mimetypes
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from werkzeug.datastructures import Headers
from werkzeug.security import safe_join
from werkzeug.wrappers import Request, Response

from dfd.core.headers import API_SECURITY_HEADERS
from dfdlocal import webheaders
from dfdlocal.jwtauth import JwtVerifier, TokenRejected, api_gateway_claims
from dfdlocal.names import ACCOUNT_ID
from dfdlocal.runtime import Runtime
from dfdlocal.template import LOCAL_API_ID, CorsConfig, HttpRoute

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger("dfdlocal.api")

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # HTTP API request payload limit
CONFIG_JS = 'window.DFD_CONFIG = {"apiBase": ""};\n'
TEXT_TYPES = ("text/", "application/json", "application/javascript", "application/xml", "+json", "+xml")
TEXT_TYPES_EXTRA = ("application/x-www-form-urlencoded", "application/graphql")
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
    ".ico": "image/x-icon",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".wasm": "application/wasm",
}


def _json_response(status: int, document: Any) -> Response:
    return Response(json.dumps(document, separators=(",", ":")), status=status, content_type="application/json")


def config_js(auth: Mapping[str, str] | None = None) -> str:
    """The pages' configuration (web/README.md): the API on this same origin and, when given, the sign-in
    service (``{"endpoint", "clientId", "region"}``)."""
    config: dict[str, Any] = {"apiBase": ""}
    if auth is not None:
        config["auth"] = dict(auth)
    return f"window.DFD_CONFIG = {json.dumps(config)};\n"


# --------------------------------------------------------------------------------------------------
# JWT authorizers
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RouteAuthorizer:
    """A JWT authorizer as API Gateway runs it for the routes it guards."""

    name: str
    header: str  # the identity source: a request header, lower case
    verifier: JwtVerifier

    @staticmethod
    def identity_header(identity_source: str) -> str:
        """``$request.header.Authorization`` -> ``authorization`` (the only kind of identity source emulated)."""
        prefix = "$request.header."
        if not identity_source.startswith(prefix) or len(identity_source) == len(prefix):
            raise ValueError(f"identity source {identity_source!r} is not emulated (only {prefix}<name>)")
        return identity_source[len(prefix) :].lower()

    def authorize(self, request: Request, scopes: tuple[str, ...]) -> dict[str, Any] | Response:
        """The ``requestContext.authorizer`` of a request allowed on a route requiring ``scopes``, or the 401/403."""
        header = request.headers.get(self.header)
        if not header or not header.strip():
            log.info("%s: no %s header -> 401", self.name, self.header)
            return _json_response(401, {"message": "Unauthorized"})
        try:
            claims = self.verifier.verify_authorization(header)
        except TokenRejected as rejected:
            log.info("%s: token refused (%s) -> 401", self.name, rejected.reason)
            response = _json_response(401, {"message": "Unauthorized"})
            response.headers["www-authenticate"] = 'Bearer scope="" error="invalid_token"'
            return response
        granted: list[str] | None = None
        if scopes:
            raw = claims.get("scope")
            held = raw.split() if isinstance(raw, str) else []
            granted = [scope for scope in held if scope in scopes]
            if not granted:
                log.info("%s: token has none of the scopes %s -> 403", self.name, " ".join(scopes))
                response = _json_response(403, {"message": "Forbidden"})
                response.headers["www-authenticate"] = f'Bearer scope="{" ".join(scopes)}" error="insufficient_scope"'
                return response
        return {"jwt": {"claims": api_gateway_claims(claims), "scopes": granted}}


def not_found() -> Response:
    return _json_response(404, {"message": "Not Found"})


# --------------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompiledRoute:
    route: HttpRoute
    pattern: re.Pattern[str] | None  # None for $default
    greedy: bool
    literal_segments: int

    @classmethod
    def compile(cls, route: HttpRoute) -> CompiledRoute:
        if route.path == "$default":
            return cls(route, None, True, -1)
        parts: list[str] = []
        literals = 0
        greedy = False
        for segment in route.path.strip("/").split("/") if route.path != "/" else []:
            match = re.fullmatch(r"\{([A-Za-z0-9_.-]+)(\+?)\}", segment)
            if match is None:
                parts.append(re.escape(segment))
                literals += 1
            elif match.group(2):
                parts.append(f"(?P<{_group(match.group(1))}>.+)")
                greedy = True
            else:
                parts.append(f"(?P<{_group(match.group(1))}>[^/]+)")
        return cls(route, re.compile("/" + "/".join(parts)), greedy, literals)

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.route.method not in ("ANY", method):
            return None
        if self.pattern is None:
            return {}
        found = self.pattern.fullmatch(path)
        if found is None:
            return None
        return {_ungroup(key): value for key, value in found.groupdict().items()}

    def rank(self) -> tuple[int, int, int, int]:
        return (
            self.pattern is not None,
            not self.greedy,
            self.literal_segments,
            self.route.method != "ANY",
        )


def _group(name: str) -> str:
    return "p_" + name.replace(".", "_dot_").replace("-", "_dash_")


def _ungroup(group: str) -> str:
    return group[2:].replace("_dot_", ".").replace("_dash_", "-")


class Router:
    def __init__(self, routes: Iterable[HttpRoute]) -> None:
        compiled = [CompiledRoute.compile(route) for route in routes]
        self.routes = sorted(compiled, key=lambda route: route.rank(), reverse=True)

    def find(self, method: str, path: str) -> tuple[HttpRoute, dict[str, str]] | None:
        for compiled in self.routes:
            params = compiled.match(method, path)
            if params is not None:
                return compiled.route, params
        return None


# --------------------------------------------------------------------------------------------------
# CORS as API Gateway applies it
# --------------------------------------------------------------------------------------------------
def origin_allowed(cors: CorsConfig, origin: str) -> bool:
    return any(allowed == "*" or fnmatchcase(origin, allowed) for allowed in cors.allow_origins)


def _allow_origin_value(cors: CorsConfig, origin: str) -> str:
    return "*" if "*" in cors.allow_origins and not cors.allow_credentials else origin


def preflight(cors: CorsConfig, origin: str, method: str, request_headers: str) -> Response:
    response = Response(status=204)
    del response.headers["content-type"]
    requested = [header.strip().lower() for header in request_headers.split(",") if header.strip()]
    method_ok = "*" in cors.allow_methods or method.upper() in cors.allow_methods
    headers_ok = "*" in cors.allow_headers or all(header in cors.allow_headers for header in requested)
    if not (origin_allowed(cors, origin) and method_ok and headers_ok):
        log.info("CORS preflight refused: origin %s, method %s, headers %s", origin, method, requested)
        return response
    value = _allow_origin_value(cors, origin)
    response.headers["access-control-allow-origin"] = value
    response.headers["access-control-allow-methods"] = ",".join(cors.allow_methods)
    if requested:
        allow_headers = requested if "*" in cors.allow_headers else cors.allow_headers
        response.headers["access-control-allow-headers"] = ",".join(allow_headers)
    if cors.max_age is not None:
        response.headers["access-control-max-age"] = str(cors.max_age)
    if cors.allow_credentials:
        response.headers["access-control-allow-credentials"] = "true"
    if value != "*":
        response.headers["vary"] = "origin"
    return response


def decorate(cors: CorsConfig, origin: str | None, response: Response) -> None:
    for name in [name for name, _ in response.headers.items() if name.lower().startswith("access-control-")]:
        del response.headers[name]  # API Gateway ignores the integration's CORS headers
    if not origin or not origin_allowed(cors, origin):
        return
    value = _allow_origin_value(cors, origin)
    response.headers["access-control-allow-origin"] = value
    if cors.expose_headers:
        response.headers["access-control-expose-headers"] = ",".join(cors.expose_headers)
    if cors.allow_credentials:
        response.headers["access-control-allow-credentials"] = "true"
    if value != "*":
        response.headers.add("vary", "origin")


# --------------------------------------------------------------------------------------------------
# Payload format 2.0
# --------------------------------------------------------------------------------------------------
def is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return not kind or any(marker in kind for marker in TEXT_TYPES + TEXT_TYPES_EXTRA)


def build_event(
    request: Request,
    route: HttpRoute,
    params: Mapping[str, str],
    body: bytes,
    authorizer: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    cookie_header = headers.pop("cookie", "")
    host = headers.get("host", "")
    headers.setdefault("x-forwarded-for", request.remote_addr or "")
    headers.setdefault("x-forwarded-proto", request.scheme)
    headers.setdefault("x-forwarded-port", host.rpartition(":")[2] if ":" in host else "80")
    raw_uri = str(request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.path)
    raw_path = raw_uri.split("?", 1)[0]
    raw_query = request.environ.get("QUERY_STRING", "")
    now = datetime.now(UTC)
    request_id = str(uuid.uuid4())
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": LOCAL_API_ID,
            "domainName": host,
            "domainPrefix": host.split(".", 1)[0],
            "http": {
                "method": request.method,
                "path": raw_path,
                "protocol": request.environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
                "sourceIp": request.remote_addr or "",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route.route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if authorizer is not None:
        event["requestContext"]["authorizer"] = dict(authorizer)
    if cookie_header:
        event["cookies"] = [cookie.strip() for cookie in cookie_header.split(";") if cookie.strip()]
    if raw_query:
        query: dict[str, str] = {}
        for key, value in parse_qsl(raw_query, keep_blank_values=True):
            query[key] = f"{query[key]},{value}" if key in query else value
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = dict(params)
    if body:
        if is_text(headers.get("content-type", "")):
            try:
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
        else:
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event


def build_response(result: Any) -> Response:
    """A v2 function result as the HTTP response API Gateway sends."""
    if not (isinstance(result, dict) and "statusCode" in result):
        inferred = result if isinstance(result, str) else json.dumps(result)
        return Response(inferred, status=200, content_type="application/json")
    try:
        status = int(result["statusCode"])
    except (TypeError, ValueError):
        log.error("function returned an invalid statusCode %r", result.get("statusCode"))
        return _json_response(500, {"message": "Internal Server Error"})
    raw_body = result.get("body")
    body: bytes
    if raw_body is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(str(raw_body))
    else:
        body = (raw_body if isinstance(raw_body, str) else json.dumps(raw_body)).encode()
    headers = Headers()
    for name, value in (result.get("headers") or {}).items():
        headers[str(name)] = _header_text(value)
    for name, values in (result.get("multiValueHeaders") or {}).items():  # not v2, tolerated
        for value in values:
            headers.add(str(name), _header_text(value))
    for cookie in result.get("cookies") or []:
        headers.add("set-cookie", str(cookie))
    response = Response(body, status=status, headers=headers)
    if "content-type" not in {name.lower() for name, _ in headers.items()}:
        del response.headers["content-type"]
    return response


def _header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------------------------------
# Static files
# --------------------------------------------------------------------------------------------------
# What the pages are made of: markup, scripts, styles, wasm, images, fonts. Anything else under web/ (README.md,
# package.json, node_modules, licences, source maps, config.example.js) is the project's, not the app's.
SERVED_SUFFIXES = frozenset(
    {
        ".html",
        ".js",
        ".mjs",
        ".css",
        ".wasm",
        ".svg",
        ".ico",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".woff",
        ".woff2",
    }
)
NOT_SERVED = frozenset({"node_modules", "scripts", "config.example.js"})  # web/scripts: the vendor build


class StaticFiles:
    def __init__(self, root: Path, headers: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.headers = dict(headers or {})

    def find(self, path: str) -> Path | None:
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
            return None  # no page is named so (a NUL fails every file-system call)
        relative = path.lstrip("/")
        parts = [part for part in relative.split("/") if part]
        if any(part.startswith(".") or part in NOT_SERVED for part in parts):
            return None  # no dotfiles, no '..', nothing of the project's
        found = self._find(relative)
        return found if found is not None and found.suffix.lower() in SERVED_SUFFIXES else None

    def _find(self, relative: str) -> Path | None:
        candidates = [relative or "index.html"]
        if relative and not relative.endswith("/"):
            candidates.append(relative + ".html")
        if relative.endswith("/") or not relative:
            candidates.append(relative + "index.html")
        root = self.root.resolve()
        for candidate in candidates:
            joined = safe_join(str(root), candidate)
            if joined is None:
                return None
            try:
                file = Path(joined).resolve()
                if file.is_file() and file.is_relative_to(root):
                    return file
                if file.is_dir() and (file / "index.html").is_file():
                    return file / "index.html"
            except (OSError, ValueError):  # a name the file system refuses (too long...): no such page
                return None
        return None

    def response(self, path: str) -> Response | None:
        file = self.find(path)
        if file is None:
            return None
        content_type = CONTENT_TYPES.get(file.suffix.lower()) or (
            mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        )
        response = Response(file.read_bytes(), status=200, content_type=content_type)
        response.headers["cache-control"] = "no-cache"
        response.headers.update(self.headers)
        response.headers["x-content-type-options"] = "nosniff"
        return response


# --------------------------------------------------------------------------------------------------
# The WSGI application
# --------------------------------------------------------------------------------------------------
class HttpApi:
    def __init__(
        self,
        routes: Iterable[HttpRoute],
        cors: Mapping[str, CorsConfig | None],
        runtime: Runtime,
        web_root: Path,
        *,
        authorizers: Mapping[str, RouteAuthorizer] | None = None,
        config_script: str = CONFIG_JS,
        openapi_document: Path | None = None,
        page_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.routes = list(routes)
        self.router = Router(self.routes)
        self.authorizers = dict(authorizers or {})
        self.config_script = config_script
        self.openapi_document = openapi_document
        missing = sorted({r.authorizer for r in self.routes if r.authorizer and r.authorizer not in self.authorizers})
        if missing:
            raise ValueError(f"routes name authorizer(s) that are not configured: {', '.join(missing)}")
        self.runtime = runtime
        self.page_headers = dict(page_headers if page_headers is not None else webheaders.page_headers())
        self.static = StaticFiles(web_root, self.page_headers)
        # One HTTP API is served on one port: the CORS of the API the routes belong to.
        apis = {route.api for route in self.routes}
        configs = [cors.get(api) for api in apis]
        self.cors: CorsConfig | None = next((config for config in configs if config is not None), None)
        if len(apis) > 1:
            log.warning("several HttpApis (%s) share one local port", ", ".join(sorted(apis)))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        started = time.perf_counter()
        response, target = self.dispatch(request)
        if target:
            log.info(
                "%s %s -> %d %s (%.0f ms)",
                request.method,
                request.full_path.rstrip("?"),
                response.status_code,
                target,
                (time.perf_counter() - started) * 1000,
            )
        return response(environ, start_response)

    def dispatch(self, request: Request) -> tuple[Response, str]:
        origin = request.headers.get("origin")
        requested_method = request.headers.get("access-control-request-method")
        if request.method == "OPTIONS" and self.cors is not None and origin and requested_method:
            headers = request.headers.get("access-control-request-headers", "")
            return preflight(self.cors, origin, requested_method, headers), "preflight"
        found = self.router.find(request.method, request.path)
        if found is None:
            response, target = self.fallback(request)
        else:
            route, params = found
            response = self.invoke(request, route, params)
            target = route.function
        if self.cors is not None and (found is not None or target == "404"):
            decorate(self.cors, origin, response)
        return response, target

    def fallback(self, request: Request) -> tuple[Response, str]:
        if request.method in ("GET", "HEAD"):
            if request.path == "/config.js":
                response = Response(self.config_script, content_type="text/javascript; charset=utf-8")
                response.headers["cache-control"] = "no-store"
                response.headers.update(self.page_headers)
                return response, ""
            if request.path == "/openapi.yaml" and self.openapi_document is not None:
                response = Response(self.openapi_document.read_bytes(), content_type="application/yaml")
                response.headers["cache-control"] = "no-cache"
                response.headers.update(self.page_headers)
                return response, ""
            static = self.static.response(request.path)
            if static is not None:
                return static, ""
        response = not_found()
        response.headers.update(API_SECURITY_HEADERS)
        return response, "404"

    def invoke(self, request: Request, route: HttpRoute, params: Mapping[str, str]) -> Response:
        context: dict[str, Any] | None = None
        if route.authorizer is not None:
            outcome = self.authorizers[route.authorizer].authorize(request, route.scopes)
            if isinstance(outcome, Response):
                outcome.headers["apigw-requestid"] = str(uuid.uuid4())
                return outcome
            context = outcome
        if (request.content_length or 0) > MAX_PAYLOAD_BYTES:
            return _json_response(413, {"message": "Request Entity Too Large"})
        body = request.get_data(cache=False)
        if len(body) > MAX_PAYLOAD_BYTES:
            return _json_response(413, {"message": "Request Entity Too Large"})
        event = build_event(request, route, params, body, context)
        invocation = self.runtime.invoke(route.function, event)
        if not invocation.ok:
            return _json_response(500, {"message": "Internal Server Error"})
        response = build_response(invocation.result)
        response.headers["apigw-requestid"] = event["requestContext"]["requestId"]
        return response
