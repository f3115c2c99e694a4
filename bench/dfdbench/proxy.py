"""A TCP proxy that caps each connection's download bandwidth (and can add a per-request latency), to stand
in for real S3 (~100 MB/s per connection, tens of ms to first byte) in front of the local emulator.

``python -m dfdbench.proxy --target 127.0.0.1:PORT --bandwidth 100e6 [--latency-ms 10] [--upload-bandwidth B]``
prints ``ready <port>``. Each accepted connection gets two threads: client → server forwarded as it comes (after
``latency`` per chunk of up to 256 KiB it moves: once per request for a GET; the upload rows add none; paced like
downloads when ``--upload-bandwidth`` is given: the upload rows), server → client paced by a token bucket at
``bandwidth`` bytes/s.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import socket
import threading
import time
from collections.abc import Callable

from dfdbench.emulator import ChildProcess, announce

CHUNK = 256 * 1024
BURST_SECONDS = 0.005  # idle time earns at most this much credit


def _upstream(client: socket.socket, server: socket.socket, latency: float, bandwidth: float | None) -> None:
    """Client → server: forwarded as it comes (after `latency` per chunk moved, ≤ CHUNK), or paced at
    `bandwidth` like downloads. On Linux the bytes go socket → pipe → socket inside the kernel (``splice``):
    the proxy's own CPU per byte would otherwise compete with the upload it measures on a small box."""
    due = time.monotonic()
    move = _spliced(client, server, latency) if hasattr(os, "splice") else _copied(client, server, latency)
    try:
        while received := move():
            if bandwidth:
                now = time.monotonic()
                due = max(due, now - BURST_SECONDS) + received / bandwidth
                if due > now:
                    time.sleep(due - now)
    except OSError:
        pass
    finally:
        for sock in (server, client):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _copied(source: socket.socket, target: socket.socket, latency: float) -> Callable[[], int]:
    """Up to CHUNK bytes from `source` to `target` through one buffer, `latency` after they arrived: the
    count (0 at the end)."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)

    def move() -> int:
        received = source.recv_into(buffer)
        if received and latency:
            time.sleep(latency)
        target.sendall(view[:received])
        return received

    return move


def _spliced(source: socket.socket, target: socket.socket, latency: float) -> Callable[[], int]:
    """The same through a pipe with ``os.splice`` (no copy to user space)."""
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, CHUNK)
    closed = False

    def move() -> int:
        nonlocal closed
        try:
            received = os.splice(source.fileno(), write_end, CHUNK)
            if received and latency:
                time.sleep(latency)
            left = received
            while left:
                left -= os.splice(read_end, target.fileno(), left)
        except BaseException:
            received = 0
            raise
        finally:
            if not received and not closed:
                closed = True
                os.close(read_end)
                os.close(write_end)
        return received

    return move


def _downstream(server: socket.socket, client: socket.socket, bandwidth: float) -> None:
    due = time.monotonic()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        while received := server.recv_into(buffer):
            client.sendall(view[:received])
            now = time.monotonic()
            due = max(due, now - BURST_SECONDS) + received / bandwidth
            if due > now:
                time.sleep(due - now)
    except OSError:
        pass
    finally:
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def serve(
    host: str, port: int, target: tuple[str, int], bandwidth: float, latency: float, upload: float | None = None
) -> None:
    listener = socket.create_server((host, port), backlog=128)
    announce(listener.getsockname()[1])
    while True:
        client, _ = listener.accept()
        server = socket.create_connection(target)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_upstream, args=(client, server, latency, upload), daemon=True).start()
        threading.Thread(target=_downstream, args=(server, client, bandwidth), daemon=True).start()


class ThrottlingProxy(ChildProcess):
    def __init__(
        self,
        target_port: int,
        bandwidth: float,
        latency_ms: float,
        host: str = "127.0.0.1",
        upload_bandwidth: float | None = None,
    ) -> None:
        args = ["-m", "dfdbench.proxy", "--target", f"{host}:{target_port}", "--bandwidth", str(bandwidth)]
        if upload_bandwidth:
            args += ["--upload-bandwidth", str(upload_bandwidth)]
        super().__init__([*args, "--latency-ms", str(latency_ms)], "throttling proxy")
        self.url = f"http://{host}:{self.port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--target", required=True, help="host:port of the emulator")
    parser.add_argument("--bandwidth", type=float, default=100e6, help="bytes/s per connection")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added before each request is forwarded")
    parser.add_argument("--upload-bandwidth", type=float, help="bytes/s per connection, client to server")
    options = parser.parse_args()
    host, port = options.target.rsplit(":", 1)
    target = (host, int(port))
    serve(options.host, options.port, target, options.bandwidth, options.latency_ms / 1000, options.upload_bandwidth)


if __name__ == "__main__":
    main()
