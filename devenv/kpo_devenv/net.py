"""Loopback ports for the servers the tests start."""

from __future__ import annotations

import itertools
import os
import random
import re
import socket

LOOPBACK = "127.0.0.1"

#: Ports handed out by :func:`free_port`: below Linux's ephemeral range (32768-60999 by
#: default), so an outgoing connection's local port never takes one between its pick and the
#: server's bind.
PORT_RANGE = range(10000, 32000)
#: Slices of :data:`PORT_RANGE`, one per pytest-xdist worker (``PYTEST_XDIST_WORKER=gw<N>``),
#: so that parallel test workers never pick the same port.
WORKER_SLICES = 8


def _candidates() -> itertools.cycle[int]:
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    ports = PORT_RANGE
    if worker is not None:
        size = len(PORT_RANGE) // WORKER_SLICES
        start = PORT_RANGE.start + (int(worker.group(1)) % WORKER_SLICES) * size
        ports = range(start, start + size)
    # A random start: a child process (a CLI the tests run) does not replay its parent's picks.
    offset = random.randrange(len(ports))
    return itertools.cycle([*ports[offset:], *ports[:offset]])


_next_port = _candidates()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    Ports come in turn from this process's slice of :data:`PORT_RANGE` (its pytest-xdist
    worker's, or the whole range), skipping any that something has bound; the caller's server
    binds it next. A process hands out each port once before it wraps around.

    Raises:
        OSError: no port of the slice is free.
    """
    for _ in range(len(PORT_RANGE)):
        port = next(_next_port)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise OSError("no free loopback port left in the test port range")


def port_accepts(port: int, host: str = LOOPBACK, timeout_s: float = 0.5) -> bool:
    """Return whether a TCP connection to ``host:port`` succeeds within ``timeout_s`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
