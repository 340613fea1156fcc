"""The suite's offline guard fires on any non-loopback connection and lets loopback through."""

from __future__ import annotations

import socket

import httpx
import pytest

# conftest's NetworkAttempt is an AssertionError; its message is what proves the guard fired.
NetworkAttempt = AssertionError
GUARD = "tried to reach the network"


@pytest.mark.parametrize("address", [("203.0.113.7", 80), ("8.8.8.8", 53), ("192.0.2.1", 443)])
def test_guard_refuses_ipv4(address):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, \
            pytest.raises(NetworkAttempt, match=GUARD):
        s.connect(address)


def test_guard_refuses_ipv6_and_connect_ex():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python build")
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s, pytest.raises(NetworkAttempt, match=GUARD):
        s.connect(("2001:db8::1", 80, 0, 0))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(NetworkAttempt, match=GUARD):
        s.connect_ex(("198.51.100.3", 80))


def test_guard_stops_an_http_client_before_any_packet():
    with pytest.raises(NetworkAttempt, match=GUARD), httpx.Client(timeout=2) as c:
        c.get("http://203.0.113.9/v1/models")


def test_loopback_still_connects():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=2):
            conn, _ = server.accept()
            conn.close()
