"""The TCP ports a network namespace listens on, read from the text of ``/proc/net/tcp`` and ``/proc/net/tcp6``.

Each line after a table's header is one socket: ``sl local_address rem_address st ... uid ...``, where
``local_address`` is ``ADDRESS:PORT`` in hex (the address as host-order 32-bit words) and ``st`` ``0A``
is LISTEN. Both tables may be given in one text (``cat /proc/net/tcp /proc/net/tcp6``): header lines
are skipped wherever they are, and IPv4 and IPv6 addresses are told apart by their length. Stdlib only.
"""

from __future__ import annotations

import ipaddress

_LISTEN = "0A"
_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # a wildcard's address to connect to


def listening_ports_parse(text: str, uid: int | None = None) -> dict[int, str]:
    """The ports listened on in ``text`` (sockets of ``uid`` only, unless None), each with the address
    to connect to (the loopback for a wildcard). The first table listing a port wins."""
    return _sockets_in_state(text, _LISTEN, uid)


def _sockets_in_state(text: str, state: str, uid: int | None) -> dict[int, str]:
    """The local ports of the sockets of a /proc/net table in ``state`` (of ``uid`` only, unless None),
    each with the address to reach it at (the loopback for a wildcard); port 0 (unbound) is left out."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8 or fields[3] != state or not fields[0].rstrip(":").isdigit():
            continue
        if uid is not None and fields[7] != str(uid):
            continue
        address_hex, _, port_hex = fields[1].partition(":")
        try:
            address = proc_address(address_hex)
            port = int(port_hex, 16)
        except ValueError:
            continue
        if port:
            found.setdefault(port, _LOOPBACK.get(address, address))
    return found


def proc_address(text: str) -> str:
    """An address of /proc/net/tcp{,6} (host-order 32-bit words in hex) as text."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


_UNCONNECTED = "07"  # a UDP socket's state in /proc/net/udp when it is bound and not connected


def bound_udp_ports_parse(text: str, uid: int | None = None) -> dict[int, str]:
    """The UDP ports bound and not connected in ``text`` (``/proc/net/udp`` and ``udp6``; sockets of ``uid``
    only, unless None), each with the address to send to (the loopback for a wildcard): UDP's "listening"."""
    return _sockets_in_state(text, _UNCONNECTED, uid)
