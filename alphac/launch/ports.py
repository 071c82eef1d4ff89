"""Loopback ports for owners to listen on, chosen below the kernel's ephemeral range.

A port the kernel hands out for `bind(("127.0.0.1", 0))` comes from the ephemeral range,
the same range it takes the local port of every outgoing connection from: between the
moment such a port is found free and the moment an owner listens on it, another run's
owner connecting to its peers can be given it (`Address already in use`). Ports below
that range are never handed out that way, so they are drawn there, at random, and each
checked free by binding it.
"""

from __future__ import annotations

import random
import socket

FLOOR = 10000  # below it: well-known and registered services
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def _ephemeral_floor() -> int:
    try:
        with open(RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_ports(n: int, host: str = "127.0.0.1", contiguous: bool = False) -> list[int]:
    """n distinct ports free now (`contiguous`: n consecutive ones, for a base port plus
    each owner's place on its host), below the ephemeral range where it leaves room, else
    the kernel's choice (then not consecutive). All are held bound together while they are
    chosen."""
    top = _ephemeral_floor()
    if top - FLOOR >= 64 * n:
        for _ in range(200):
            if contiguous:
                first = random.randrange(FLOOR, top - n)
                picked = list(range(first, first + n))
            else:
                picked = random.sample(range(FLOOR, top), n)
            try:
                return _bound(host, picked)
            except OSError:
                continue
    return _bound(host, [0] * n)


def _bound(host: str, ports: list[int]) -> list[int]:
    """The ports each of `ports` binds to (0: the kernel's choice), all held bound together
    so none is given twice; OSError when one is taken."""
    socks = []
    try:
        for port in ports:
            socks.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            socks[-1].bind((host, port))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
