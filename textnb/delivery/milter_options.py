"""What the milter is told: its policy and its socket, checked without pymilter.

``textnb milter`` checks its options before it imports :mod:`textnb.delivery.milter` (which
needs pymilter and the libmilter it links), so that a bad ``--socket`` or a public
address is named as such on a machine without them, not answered with "install
pymilter" (tests/test_operator_errors.py).
"""

from __future__ import annotations

import ipaddress
import math
import socket
from pathlib import Path
from typing import NamedTuple

from ..errors import TextnbError
from .client import MAX_MESSAGE_BYTES
from .verdict_headers import SA_FLAG, SA_STATUS, SCORE, STATUS

__all__ = ["MilterError", "MilterPolicy", "parse_socket"]


class MilterError(TextnbError):
    """The milter cannot start: a bad socket or setting, or a socket in use."""


class MilterPolicy(NamedTuple):
    """What the milter does with a verdict, and its bounds.

    spamassassin (bool): also add X-Spam-Flag / X-Spam-Status, as ``filter --spamassassin``.
    reject_above (float | None): reject spam whose P(spam) is above this (0 < P < 1).
    quarantine_above (float | None): quarantine spam whose P(spam) is above this.
    on_error (str): 'accept' (unchanged) or 'tempfail' (4xx, the sender retries).
    max_bytes (int): larger messages are accepted unscored and unchanged.
    timeout (float): seconds a message may wait for its verdict, queueing included.
    cost_ratio (float | None): λ for the decision; None: the model's own.
    """

    spamassassin: bool = False
    reject_above: float | None = None
    quarantine_above: float | None = None
    on_error: str = "accept"
    max_bytes: int = MAX_MESSAGE_BYTES
    timeout: float = 10.0
    cost_ratio: float | None = None

    def check(self) -> "MilterPolicy":
        for name in ("reject_above", "quarantine_above"):
            p = getattr(self, name)
            if p is not None and not 0 < p < 1:
                raise MilterError(f"{name.replace('_', '-')} {p} must be a probability "
                                  "between 0 and 1 (e.g. 0.999: P(spam) above 99.9%)")
        if self.on_error not in ("accept", "tempfail"):
            raise MilterError(f"on-error '{self.on_error}' must be accept or tempfail")
        if self.max_bytes < 1 or not self.timeout > 0:
            raise MilterError(f"max-bytes {self.max_bytes} and timeout {self.timeout} "
                              "must both be > 0")
        if self.cost_ratio is not None and not 0 < self.cost_ratio < math.inf:
            raise MilterError(f"cost ratio {self.cost_ratio} must be > 0 and finite")
        return self

    @property
    def replaced(self) -> tuple[bytes, ...]:
        """The fields a verdict replaces: ``verdict_headers.add_verdict``'s list."""
        return (STATUS, SCORE, SA_FLAG, SA_STATUS) if self.spamassassin else (STATUS, SCORE)


def parse_socket(spec: str, allow_remote: bool = False) -> tuple[str, Path | None]:
    """Check a socket in Postfix's notation; RETURNS (spec for libmilter, unix path or None).

    inet:PORT@HOST (IPv4), inet6:PORT@HOST, unix:PATH (or local:PATH). HOST must be a
    loopback address unless ``allow_remote``: the protocol has no authentication.
    """
    kind, colon, rest = spec.partition(":")
    usage = (f"'{spec}' is not a milter socket; use inet:PORT@HOST (e.g. "
             "inet:8891@127.0.0.1) or unix:PATH (e.g. unix:/run/textnb/milter.sock)")
    if kind in ("unix", "local") and rest:
        return f"unix:{rest}", Path(rest)
    if kind not in ("inet", "inet6") or not colon:
        raise MilterError(usage)
    port, at, host = rest.partition("@")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise MilterError(usage)
    if not at or not host:
        raise MilterError(f"'{spec}' names no host, so it would listen on every address; "
                          "add @127.0.0.1 (or @HOST with --allow-remote)")
    family = socket.AF_INET6 if kind == "inet6" else socket.AF_INET
    try:
        address = socket.getaddrinfo(host, int(port), family, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as exc:
        raise MilterError(f"cannot resolve '{host}' in '{spec}': {exc.strerror}") from None
    if not (ipaddress.ip_address(address).is_loopback or allow_remote):
        raise MilterError(f"'{host}' ({address}) is not a loopback address; the milter "
                          "protocol has no authentication, so listen on 127.0.0.1 or a "
                          "unix socket (or pass --allow-remote if a firewall guards the port)")
    return f"{kind}:{port}@{host}", None
