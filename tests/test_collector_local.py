"""The demo's local collector (``sparkwatch demo --collector``) when it cannot come up: the demo
gets an error with the collector's own last words, at once, not after the start-up deadline."""

from __future__ import annotations

import socket
import time
from contextlib import closing

import pytest

from sparkwatch.collector.local import START_SECONDS, LocalCollectorError, local_collector


def test_a_port_already_taken_ends_the_start_with_the_collectors_reason() -> None:
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        began = time.monotonic()
        with pytest.raises(LocalCollectorError) as raised, local_collector(None, port):
            pytest.fail("the collector came up on a port another socket holds")
    message = str(raised.value)
    assert message.startswith("the collector exited: "), message
    assert "address already in use" in message.lower(), message
    assert time.monotonic() - began < START_SECONDS  # it did not wait out the deadline
