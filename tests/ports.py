"""A free loopback port for a server a test starts in another process (the OS may hand it out again, rarely)."""
from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
