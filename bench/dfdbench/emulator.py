"""The benchmarks' AWS emulator: a moto server in its own process (so it does not share the benchmark's GIL),
on a free loopback port.

Four adjustments, all to moto's cost and none to what the service does:
- moto re-reads an object's whole value from its spool file for every GetObject, and a ranged GET slices that
  copy: a 16 MiB range of a 256 MiB object costs a 256 MiB copy. Real S3 serves a range at the range's cost,
  so here each object's bytes are kept once in memory and a range is one slice. Both the baseline loops and
  the ingest read through this same server.
- DynamoDB requests run one at a time (moto's DynamoDB is not safe under concurrent transactions), with the
  local stack's own middleware (:class:`dfdlocal.emulator.SerializeDynamoDB`).
- The tables' streams keep no records: nothing reads them here (row 15 runs its own emulator), and moto copies
  every table a transaction touches, its stream with it: after row 6's 20,000 writes each ingest commit took
  ~1.8 s. On AWS a stream adds nothing to a write's cost.
- A transaction keeps, for its rollback, a copy of the items it names, not of every table it touches (moto's
  whole-table deepcopy makes the ingest's 5-item commit ~29 ms on near-empty tables, against ~5 ms for its
  BatchGetItem, and grows with the tables). A cancelled transaction leaves every item as it was
  (tests/unit/test_bench_emulator.py).

``python -m dfdbench.emulator [--port N]`` prints ``ready <port>`` once it serves; :class:`Emulator`
starts and stops it from the benchmark process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def _keep_values_in_memory() -> None:
    """FakeKey.value returns one kept bytes object instead of a fresh copy of the spool file per read."""
    from moto.s3.models import FakeKey

    prop: property = FakeKey.value  # type: ignore[assignment]
    read, write = prop.fget, prop.fset
    assert read is not None and write is not None

    def get_value(self: Any) -> bytes:
        kept: bytes | None = self.__dict__.get("_bench_value")
        if kept is None:
            kept = read(self)
            self.__dict__["_bench_value"] = kept
        return kept

    def set_value(self: Any, value: bytes) -> None:
        self.__dict__.pop("_bench_value", None)
        write(self, value)
        if isinstance(value, bytes):
            self.__dict__["_bench_value"] = value

    FakeKey.value = property(get_value, set_value)  # type: ignore[assignment,method-assign]


def _keep_no_stream_records() -> None:
    from moto.dynamodb.models.table import StreamShard

    def add(self: Any, old: Any, new: Any) -> None:
        pass

    StreamShard.add = add  # type: ignore[method-assign]


def snapshot_touched_items(setattr: Callable[[Any, str, Any], None] = setattr) -> None:
    """moto's TransactWriteItems rolls back the items it names from copies of those items, not from copies of
    whole tables (the tables' streams keep no records here: _keep_no_stream_records)."""
    import copy

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    original = models.DynamoDBBackend.transact_write_items

    class _TablesUncopied:
        """moto's `copy` in its backend module: a whole table's deepcopy is the table itself."""

        @staticmethod
        def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        kept: list[tuple[Any, Any, Any, Any]] = []  # (table, hash key, range key, the item before or None)
        for entry in transact_items:
            try:
                op = next(iter(entry.values()))
                table = self.get_table(op["TableName"])
                keys = op.get("Key") or {
                    name: op["Item"][name] for name in (table.hash_key_attr, table.range_key_attr) if name
                }
                hash_key, range_key = self.get_keys_value(table, keys)
                kept.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
            except Exception:  # noqa: S112 (an op moto refuses: it writes nothing, and moto raises its own error)
                continue
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_key, range_key, before in reversed(kept):
                if range_key is None:
                    table.items.pop(hash_key, None)
                    if before is not None:
                        table.items[hash_key] = before
                else:
                    table.items.get(hash_key, {}).pop(range_key, None)
                    if before is not None:
                        table.items[hash_key][range_key] = before
            raise

    setattr(models, "copy", _TablesUncopied)
    setattr(models.DynamoDBBackend, "transact_write_items", transact_write_items)


def serve(host: str, port: int) -> None:
    os.environ.setdefault("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(8 * 1024**3))  # spool in memory
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    from dfdlocal.emulator import SerializeDynamoDB
    from dfdlocal.reconcile import patch_moto_start_execution

    _keep_values_in_memory()
    _keep_no_stream_records()
    snapshot_touched_items()
    patch_moto_start_execution()  # the reconcile workflow's sfn tasks, as the local stack runs them (row 5)

    class Quiet(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            pass

        def log_error(self, format: str, *args: Any) -> None:
            pass

    app = SerializeDynamoDB(DomainDispatcherApplication(create_backend_app))
    server = make_server(host, port, app, threaded=True, request_handler=Quiet)
    # where moto's Step Functions executor sends its SDK calls (row 5 runs the reaper): this very server
    os.environ["MOTO_PORT"] = str(server.server_address[1])
    announce(server.server_address[1])
    server.serve_forever()


def announce(port: int) -> None:
    """Tell the parent the port, then send stdout to /dev/null (nobody reads the pipe any more), and exit
    when the parent is gone (a benchmark killed mid-run leaves no server behind)."""
    print(f"ready {port}", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


class ChildProcess:
    """A helper process that prints ``ready <port>`` once it serves."""

    def __init__(self, args: list[str], what: str, env: dict[str, str] | None = None) -> None:
        self.what = what
        self.process = subprocess.Popen(
            [sys.executable, *args],
            stdout=subprocess.PIPE,
            stderr=None if os.environ.get("DFD_BENCH_DEBUG") else subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            self.stop()
            raise RuntimeError(f"{what} did not start (exit code {self.process.poll()})")
        self.port = int(line[1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Emulator(ChildProcess):
    def __init__(self, host: str = "127.0.0.1") -> None:
        env = dict(os.environ)
        env["MOTO_PORT"] = "0"
        super().__init__(["-m", "dfdbench.emulator", "--host", host, "--port", "0"], "moto emulator", env)
        self.url = f"http://{host}:{self.port}"
        started = time.monotonic()
        while time.monotonic() - started < 10:  # moto answers once its backends are loaded
            try:
                import urllib.request

                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=2).close()  # noqa: S310 - loopback
                return
            except OSError:
                time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    serve(options.host, options.port)


if __name__ == "__main__":
    main()
