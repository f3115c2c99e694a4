"""DynamoDB Local's port is held from its choice until the JVM listens on it (dfdlocal.ddblocal.reserve_port): a
server of another test started meanwhile cannot take it and answer the readiness check in DynamoDB Local's place."""

from __future__ import annotations

import errno
import socket

import pytest

from dfdlocal.ddblocal import reserve_port


def test_a_reserved_port_is_refused_to_any_other_bind_and_given_to_the_listener_that_asks_for_it() -> None:
    reservation = reserve_port()
    port = reservation.getsockname()[1]
    try:
        other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # a server binding it without SO_REUSEADDR
        with other, pytest.raises(OSError) as refused:
            other.bind(("127.0.0.1", port))
        assert refused.value.errno == errno.EADDRINUSE
        jvm = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # Jetty's server socket sets SO_REUSEADDR
        with jvm:
            jvm.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            jvm.bind(("127.0.0.1", port))
            jvm.listen()
            late = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # once it listens nobody else binds it
            with late, pytest.raises(OSError):
                late.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                late.bind(("127.0.0.1", port))
    finally:
        reservation.close()
