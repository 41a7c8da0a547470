"""A local PS's port: outside the kernel's ephemeral range, free when chosen, never the one
to avoid; the fallback to the kernel's choice when the range leaves no room."""

from __future__ import annotations

import random
import socket

import pytest

from elasticdl.runtime.master import ports

HOST = "127.0.0.1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32768\t60999\n", (32768, 60999)),
        ("1024 65535", (1024, 65535)),
        ("", ports.LINUX_DEFAULT_EPHEMERAL),
        (None, ports.LINUX_DEFAULT_EPHEMERAL),
        ("32768", ports.LINUX_DEFAULT_EPHEMERAL),
        ("a b", ports.LINUX_DEFAULT_EPHEMERAL),
        ("60999 32768", ports.LINUX_DEFAULT_EPHEMERAL),
        ("32768 70000", ports.LINUX_DEFAULT_EPHEMERAL),
    ],
)
def test_the_ephemeral_range_is_read_or_defaulted(text: str | None, expected: tuple) -> None:
    assert ports.ephemeral_range(text) == expected


@pytest.mark.parametrize(
    ("ephemeral", "expected"),
    [
        ((32768, 60999), range(16384, 32768)),  # Linux's default: the stretch below
        ((49152, 65535), range(32768, 49152)),  # IANA's: below
        ((10000, 65535), range(1024, 10000)),  # little room below, none above
        ((1024, 40000), range(40001, 56385)),  # none below: above
        ((1024, 65535), range(0)),  # no room: the kernel chooses
        ((2000, 64000), range(64001, 65536)),  # above is wider than below
    ],
)
def test_candidates_lie_outside_the_ephemeral_range(ephemeral: tuple, expected: range) -> None:
    assert ports.candidate_ports(ephemeral) == expected


def test_a_chosen_port_is_outside_the_range_and_free() -> None:
    pool = ports.candidate_ports(ports.read_ephemeral_range())
    for _ in range(20):
        port = ports.choose_port(HOST)
        assert port in pool
        with socket.socket() as s:
            s.bind((HOST, port))  # free: it binds


class _Scripted(random.Random):
    """Draws the given ports first, then at random."""

    def __init__(self, *first: int) -> None:
        super().__init__(7)
        self.first = list(first)

    def choice(self, seq):  # type: ignore[override]
        return self.first.pop(0) if self.first else super().choice(seq)


def test_a_busy_port_and_the_avoided_one_are_passed_over() -> None:
    pool = range(20000, 30000)
    with socket.socket() as busy:
        busy.bind((HOST, 0))
        busy.listen()
        taken = busy.getsockname()[1]
        port = ports.choose_port(
            HOST, avoid=(20001,), rng=_Scripted(taken, 20001), candidates=range(taken, taken + 1)
        )
        assert port not in (taken, 20001)  # nothing left in the pool: the kernel's choice
        port = ports.choose_port(HOST, avoid=(20001,), rng=_Scripted(20001), candidates=pool)
        assert port in pool and port != 20001


def test_no_room_falls_back_to_the_kernels_choice() -> None:
    port = ports.choose_port(HOST, avoid=(), candidates=range(0))
    assert 0 < port <= ports.LAST_PORT


def test_a_host_that_cannot_be_bound_raises_instead_of_looping():
    """An IPv6 literal on an IPv4 socket: refused by every bind, with no name lookup."""
    with pytest.raises(OSError):
        ports.choose_port("::1", candidates=range(20000, 20010))
