"""Targets 10 and 11: multipart uploads over HTTP on the local stack, the parts sent through a link capped per
connection in the upload direction (the throttling proxy between the client and the stack's S3).

``python -m dfdbench.mpupload --row parallel|resume --size-mib N --bandwidth B [--parts-in-flight 4]
[--runs R]`` starts the local stack (``python -m dfdlocal`` on free ports, in its own process: the client
must not share its GIL) and the proxy, and prints one JSON line.

- ``parallel``: the same file uploaded as one presigned PUT and as a multipart upload with N parts in flight,
  alternately, R times each; each timed from ``POST /upload`` to the PUT's 200 / complete's 202 (the
  multipart side pays its presign calls and per-part SHA-256s). Between uploads the ingest is awaited (it would
  otherwise hash 256 MiB on the cores the next upload needs) and its status checked. Then once more, multipart
  with no link in between: what this box's stack accepts at all (its ceiling).
- ``resume``: a multipart upload cancelled once half the file is held by S3 (parts in flight abandoned, as a
  dropped connection or Ctrl-C leaves them), then resumed by a new uploader from the state file: the bytes the
  resumed run hands to part PUTs, against the file's size. The upload must then be ingested as ``stored``
  with the file's SHA-256.

The client is scripts/upload's (``dfdtools.multipart``); its session rewrites the presigned URLs' address to
the proxy's and keeps the signed ``Host``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
FINAL = {"stored", "duplicate", "failed", "expired"}


class ViaProxy(requests.Session):
    """Requests to `origin` (the stack's S3) go to `proxy` instead, with the Host the URL was signed for."""

    def __init__(self, origin: str, proxy: str) -> None:
        from dfdtools.multipart import mount_large_blocks

        super().__init__()
        mount_large_blocks(self)  # the uploader's own default session does the same (scripts/upload uses it)
        self.origin, self.proxy, self.host = origin, proxy, urlsplit(origin).netloc
        self.on_part: Any = None  # called with each part PUT's response (the resume row's trigger)
        self.last_part = 0.0  # perf_counter when the last request to S3 answered

    def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(url, str) and url.startswith(self.origin + "/"):
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Host": self.host}
            response = super().request(method, self.proxy + url[len(self.origin) :], *args, **kwargs)
            self.last_part = time.perf_counter()
            if self.on_part is not None:
                self.on_part(response)
            return response
        return super().request(method, url, *args, **kwargs)


def auth_headers(ready: dict[str, Any], user: str = "alice") -> dict[str, str]:
    """`user`'s access token when the stack has the template's user pool (its API then wants one), else none.
    The presigned part PUTs carry no token (S3 allows one auth mechanism)."""
    pool = ready.get("cognito")
    if not pool:
        return {}
    import boto3

    from dfdlocal.names import CREDENTIALS

    idp = boto3.session.Session().client(
        "cognito-idp",  # type: ignore[call-overload]
        endpoint_url=pool["endpoint"],
        region_name=pool["region"],
        **{k.lower(): v for k, v in CREDENTIALS.items()},
    )
    signed_in = idp.initiate_auth(
        AuthFlow="USER_PASSWORD_AUTH",
        ClientId=pool["client_id"],
        AuthParameters={"USERNAME": user, "PASSWORD": pool["password"]},
    )
    return {"Authorization": f"Bearer {signed_in['AuthenticationResult']['AccessToken']}"}


@contextmanager
def local_stack(scratch: Path, parameters: dict[str, str]) -> Iterator[dict[str, Any]]:
    """``python -m dfdlocal`` in its own process on free ports (the client must not share its GIL), its state
    in ``scratch``: its ready file's description."""
    ready = scratch / "ready.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DFD_", "AWS_", "MOTO_", "POWERTOOLS_"))}
    command = [sys.executable, "-m", "dfdlocal", "--api-port", "0", "--lambda-port", "0", "--aws-port", "0"]
    # its state (DynamoDB Local's files, objects, users) in the scratch directory, never make run's .dfd/
    command += ["--ready-file", str(ready), "--log-level", "WARNING", "--data-dir", str(scratch / "data")]
    for name, value in parameters.items():
        command += ["--param", f"{name}={value}"]
    log = (scratch / "stack.log").open("wb")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"local stack did not start: {(scratch / 'stack.log').read_text()[-3000:]}")
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written whole, but give the writer its close
        yield json.loads(ready.read_text())
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def make_file(directory: Path, size: int) -> tuple[Path, str]:
    from dfdbench.harness import content

    path = directory / f"bench-{size}.bin"
    data = content(size, 20261123)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


class Client:
    def __init__(self, api: str, session: ViaProxy, headers: dict[str, str], states: Path) -> None:
        self.api, self.session, self.headers, self.states = api, session, headers, states

    def create(self, path: Path, multipart: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"filename": path.name, "size": path.stat().st_size}
        if multipart:
            body["multipart"] = True
        answer = self.session.post(f"{self.api}/upload", json=body, headers=self.headers, timeout=30)
        if answer.status_code != 201:
            raise RuntimeError(f"POST /upload answered {answer.status_code}: {answer.text[:300]}")
        issued: dict[str, Any] = answer.json()
        if bool(issued.get("multipart")) != multipart:
            raise RuntimeError(f"POST /upload answered multipart={issued.get('multipart')}, asked {multipart}")
        return issued

    def uploader(self, parts: int) -> Any:
        from dfdtools.multipart import MultipartUploader, StateStore, Tuning

        return MultipartUploader(
            self.api,
            session=self.session,
            headers=self.headers,
            tuning=Tuning(parts_in_flight=parts),
            states=StateStore(self.states),
        )

    def single_put(self, path: Path) -> str:
        from dfdtools.multipart import PartReader

        issued = self.create(path, multipart=False)
        reader = PartReader(str(path), 0, path.stat().st_size, lambda _: None, threading.Event())
        try:
            put = self.session.put(issued["upload_url"], data=reader, headers=issued["headers"], timeout=3600)
        finally:
            reader.close()
        if put.status_code != 200:
            raise RuntimeError(f"PUT answered {put.status_code}: {put.text[:300]}")
        return str(issued["upload_id"])

    def multipart(self, path: Path, parts: int) -> str:
        return str(self.uploader(parts).start(path, self.create(path, multipart=True)))

    def ingested(self, upload_id: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = self.session.get(f"{self.api}/metadata/{upload_id}", headers=self.headers, timeout=30)
            document: dict[str, Any] = meta.json() if meta.ok else {}
            if document.get("status") in FINAL:
                return document
            time.sleep(0.2)
        raise RuntimeError(f"upload {upload_id} not ingested after {timeout:.0f} s")


def parallel(client: Client, path: Path, parts: int, runs: int) -> dict[str, Any]:
    single: list[float] = []
    many: list[float] = []
    completes: list[float] = []  # multipart: from the last part's answer to complete's 202
    statuses: list[str] = []
    for run in range(runs):
        for kind in ("single", "multipart") if run % 2 == 0 else ("multipart", "single"):
            started = time.perf_counter()
            upload_id = client.single_put(path) if kind == "single" else client.multipart(path, parts)
            ended = time.perf_counter()
            (single if kind == "single" else many).append(ended - started)
            if kind == "multipart":
                completes.append(ended - client.session.last_part)
            statuses.append(str(client.ingested(upload_id).get("status")))
    # this box's ceiling: the same multipart upload with no link in between (the stack's own S3 is the limit)
    proxy = client.session.proxy
    client.session.proxy = client.session.origin
    try:
        started = time.perf_counter()
        upload_id = client.multipart(path, parts)
        uncapped = time.perf_counter() - started
    finally:
        client.session.proxy = proxy
    statuses.append(str(client.ingested(upload_id).get("status")))
    if any(status not in ("stored", "duplicate") for status in statuses):
        raise RuntimeError(f"ingest outcomes {statuses}")
    return {
        "single_s": single,
        "multipart_s": many,
        "complete_s": completes,
        "multipart_uncapped_s": uncapped,
        "statuses": statuses,
    }


def resume(client: Client, path: Path, parts: int, digest: str) -> dict[str, Any]:
    from dfdtools.multipart import StateStore, UploadInterrupted

    size = path.stat().st_size
    first = client.uploader(parts)
    issued = client.create(path, multipart=True)
    part_size = int(issued["part_size"])
    held = [0]
    lock = threading.Lock()

    def count(response: Any) -> None:  # cancel once half the file is held by S3
        if response.status_code == 200:
            with lock:
                held[0] += 1
                if held[0] * part_size >= size / 2:
                    first.cancel()

    client.session.on_part = count
    try:
        first.start(path, issued)
        raise RuntimeError("the upload finished before it could be interrupted")
    except UploadInterrupted as stopped:
        interrupted_with = stopped.parts_done
    finally:
        client.session.on_part = None
    kept = StateStore(client.states).load(path)
    if kept is None:
        raise RuntimeError("no state kept after the interruption")
    second = client.uploader(parts)
    upload_id = second.resume(kept)
    final = client.ingested(upload_id)
    if final.get("status") != "stored" or final.get("hash") != digest:
        raise RuntimeError(f"resumed upload ingested as {final}")
    return {
        "size": size,
        "part_size": kept.part_size,
        "part_count": kept.part_count,
        "parts_held_at_interrupt": interrupted_with,
        "sent_before": first.sent,
        "sent_after_resume": second.sent,
        "status": final.get("status"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--row", choices=("parallel", "resume"), required=True)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--bandwidth", type=float, default=40e6, help="bytes/s per connection, upload direction")
    parser.add_argument("--parts-in-flight", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    options = parser.parse_args()

    from dfdbench.proxy import ThrottlingProxy
    from dfdlocal.template import TEMPLATE, load_template

    parameters = {}
    if "MultipartThresholdBytes" in load_template(TEMPLATE)["Parameters"]:
        parameters["MultipartThresholdBytes"] = str(5 * 1024**3)  # the single PUT stays one PUT at 256 MiB
    with tempfile.TemporaryDirectory() as scratch, local_stack(Path(scratch), parameters) as ready:
        aws_port = int(urlsplit(ready["aws_url"]).port or 0)
        proxy = ThrottlingProxy(aws_port, options.bandwidth, 0.0, upload_bandwidth=options.bandwidth)
        try:
            session = ViaProxy(ready["aws_url"], proxy.url)
            client = Client(ready["api_url"], session, auth_headers(ready), Path(scratch) / "states")
            path, digest = make_file(Path(scratch), options.size_mib * MIB)
            if options.row == "parallel":
                result = parallel(client, path, options.parts_in_flight, options.runs)
                result["single_median_s"] = statistics.median(result["single_s"])
                result["multipart_median_s"] = statistics.median(result["multipart_s"])
            else:
                result = resume(client, path, options.parts_in_flight, digest)
        finally:
            proxy.stop()
    result.update(size=options.size_mib * MIB, bandwidth=options.bandwidth, parts_in_flight=options.parts_in_flight)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
