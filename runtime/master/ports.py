"""Ports for a local job's parameter servers, chosen where the kernel hands out none.

The master picks a PS's port before the PS binds it: workers are given the address while the
PS is still importing TensorFlow, so the choice cannot wait for the bind. Whatever is free at
the pick may be taken before the bind. A port from the kernel's ephemeral range -- what
`bind(port 0)` and every outgoing connection's local end draw from -- was taken in that window
in a CI run ("parameter server 1: port 49567 on 127.0.0.1 is in use"): any process on the
machine opening a connection could get it. The ports chosen here lie outside that range, so
the kernel gives them to no one; only a program binding that very number could take one.
Where the ephemeral range leaves no room (it spans every unprivileged port), the pick falls
back to the kernel's `bind(0)`, as before.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LINUX_DEFAULT_EPHEMERAL = (32768, 60999)
FIRST_UNPRIVILEGED = 1024
LAST_PORT = 65535
WIDTH = 16384
"""At most this many ports next to the ephemeral range are candidates (away from the low
ports that services listen on)."""
TRIES = 64


def ephemeral_range(text: str | None) -> tuple[int, int]:
    """The kernel's ephemeral range from the text of `ip_local_port_range` ("32768\\t60999");
    Linux's default when there is no such text or it does not read as two ports."""
    try:
        low, high = (int(word) for word in (text or "").split())
    except ValueError:
        return LINUX_DEFAULT_EPHEMERAL
    if not 0 < low <= high <= LAST_PORT:
        return LINUX_DEFAULT_EPHEMERAL
    return low, high


def candidate_ports(ephemeral: tuple[int, int], width: int = WIDTH) -> range:
    """Unprivileged ports next to, and outside, the ephemeral range: the wider of the stretch
    below it and the one above it (below on a tie), each at most `width`; empty when the range
    leaves no room on either side."""
    low, high = ephemeral
    below = range(max(FIRST_UNPRIVILEGED, low - width), low)
    above = range(high + 1, min(LAST_PORT, high + width) + 1)
    return below if len(below) >= len(above) else above


def _bindable(host: str, port: int) -> bool:
    """Whether `port` can be bound on `host` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def read_ephemeral_range() -> tuple[int, int]:
    """This machine's ephemeral range (Linux's default where it cannot be read)."""
    try:
        return ephemeral_range(EPHEMERAL_RANGE_FILE.read_text())
    except OSError:
        return LINUX_DEFAULT_EPHEMERAL


def choose_port(
    host: str = "127.0.0.1",
    avoid: Collection[int] = (),
    rng: random.Random | None = None,
    candidates: range | None = None,
) -> int:
    """A port free on `host` now, outside the kernel's ephemeral range, not in `avoid` (a
    relaunched PS gets a port other than its last: a client of the old one may still hold it).
    OSError where `host` cannot be bound at all (as a plain bind would raise).

    `candidates`: where to draw from (default: `candidate_ports` of this machine's range)."""
    pool = candidate_ports(read_ephemeral_range()) if candidates is None else candidates
    draw = rng or random.SystemRandom()
    for _ in range(TRIES if pool else 0):
        port = draw.choice(pool)
        if port not in avoid and _bindable(host, port):
            return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))  # raises where `host` cannot be bound at all
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port
