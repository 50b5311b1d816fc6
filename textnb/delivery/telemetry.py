"""Numbers from the daemons for the admin's monitoring, in the Prometheus text format.

``textnb serve --metrics [HOST:]PORT`` and ``textnb milter --metrics [HOST:]PORT``
answer ``GET /metrics`` on that loopback port (off by default; a non-loopback host is
refused: the numbers say how much mail each label gets, which is nobody else's business).
A loopback port has no owner, so every local user can read it; it holds counts, never
a message or a user name. At most ``MAX_SCRAPES`` connections at once, each closed
``SCRAPE_SECONDS`` after its accept.

What is counted (docs/monitoring.md has a sample and the PromQL that reads it):

- ``textnb_requests_total{kind}``: requests answered. serve: ``score``, ``learn``,
  ``forget``, ``ping``, ``error`` (any ERROR reply); milter: ``message`` (scored),
  ``unscored`` (over ``--max-bytes``), ``error`` (accepted unchanged or tempfailed).
- ``textnb_verdicts_total{label}``: ``spam``, ``ham``, ``unsure``.
- ``textnb_learn_requests_total{action}``: ``spam``, ``ham`` (learned), ``forget``.
- ``textnb_request_seconds{kind}``: a histogram of the time from the request to its
  answer (serve: request line read to reply sent; milter: end of message to verdict).
- ``textnb_model_age_seconds``, ``textnb_model_reloads_total``,
  ``textnb_model_messages{label}``: the shared (or only) model's file age (now minus
  its mtime: a learning scorer rewrites it within ``--flush-seconds``, a reader-only
  one when ``textnb train``/``retrain`` last wrote it), how often a changed file was
  loaded, and the messages it has learned; ``textnb_user_models`` with ``--models``.
- ``textnb_recorded_verdicts_total{outcome}`` with ``textnb serve --record``: verdicts
  ``recorded`` for the review page, and those dropped (``queue_full``, ``locked``,
  ``full``, ``damaged``, ``error``) while mail flowed, and ``explained``: those given
  their clues while the scorer was idle (textnb.review.recorder).

A user's own model gets no series of its own: one per user would make the scrape
grow with the mail system's user list.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..errors import TextnbError
from ..labels import LABELS

__all__ = ["BUCKETS", "MetricsError", "Telemetry", "parse_metrics_address", "serve_metrics"]

log = logging.getLogger("textnb.delivery.telemetry")

# Upper bounds (seconds) of the latency histogram's buckets. The finer buckets resolve one
# exchange with a warm scorer, a verdict (docs/performance.md#per-message-latency) or a
# learn (docs/learning.md#learn-latency); the coarse ones show queueing and the 10 s
# default timeout.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Scrapes served at once, and the longest one connection may stay open. Prometheus
# scrapes every 15 s and reads the few KB at once; a connection that sends nothing, or
# trickles, would otherwise hold a thread and a descriptor of the daemon for ever (and
# with them the scorer's own accept: docs/security.md). Beyond the cap a connection is
# closed at once.
MAX_SCRAPES = 4
SCRAPE_SECONDS = 5.0
# accept() errors that mean "out of a resource for now": wait before trying again.
_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


class MetricsError(TextnbError):
    """The metrics port cannot be opened: not loopback, in use, or not HOST:PORT."""


class _Histogram:
    def __init__(self):
        self.counts = [0] * (len(BUCKETS) + 1)  # the last: above every bound (+Inf only)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                break
        else:
            i = len(BUCKETS)
        self.counts[i] += 1
        self.total += seconds


class Telemetry:
    """The counters one daemon keeps; :meth:`render` writes them as a scrape.

    models (Callable[[], object]): returns what serves (a ResidentModel, or a
        ModelSet with ``.shared`` and ``loaded()``), read at each scrape.
    clock (Callable[[], float]): wall-clock seconds, for the model's age.
    """

    def __init__(self, models, clock=time.time):
        self._models = models
        self._clock = clock
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.verdicts = {"spam": 0, "ham": 0, "unsure": 0}
        self.learned = {"spam": 0, "ham": 0, "forget": 0}
        self.latency: dict[str, _Histogram] = {}
        # textnb serve --record: a VerdictRecorder, whose ``counts`` are exported
        self.recorder = None

    def observe(self, kind: str, seconds: float | None, label: str | None = None) -> None:
        """One request answered: its kind, how long it took (None: not timed, as a
        fault), and its verdict's label (kind 'score'/'message') or what was learned
        (kind 'learn': 'spam'/'ham')."""
        with self._lock:
            self.requests[kind] = self.requests.get(kind, 0) + 1
            if seconds is not None:
                self.latency.setdefault(kind, _Histogram()).observe(seconds)
            if kind in ("score", "message") and label in self.verdicts:
                self.verdicts[label] += 1
            elif kind == "learn" and label in LABELS:
                self.learned[label] += 1
            elif kind == "forget":
                self.learned["forget"] += 1

    def observe_reply(self, reply: bytes, seconds: float) -> None:
        """Count one reply of the scorer's protocol (textnb.delivery.client): the kind and label
        are read off it, so the request handlers need not know about metrics."""
        words = reply.split(None, 3)
        kind = words[1] if len(words) > 1 else b"ERROR"
        label = words[2].decode("ascii", "replace") if len(words) > 2 else None
        name = {b"OK": "score", b"LEARNED": "learn", b"FORGOTTEN": "forget",
                b"STATE": "state", b"PONG": "ping"}.get(kind, "error")
        self.observe(name, seconds, label)

    # -- the scrape ---------------------------------------------------------------------
    def render(self) -> str:
        with self._lock:
            requests = dict(self.requests)
            verdicts, learned = dict(self.verdicts), dict(self.learned)
            latency = {kind: (list(h.counts), h.total) for kind, h in self.latency.items()}
        out: list[str] = []
        _family(out, "textnb_requests_total", "counter", "Requests answered, by kind.",
                [({"kind": k}, v) for k, v in sorted(requests.items())])
        _family(out, "textnb_verdicts_total", "counter", "Verdicts given, by label.",
                [({"label": k}, v) for k, v in verdicts.items()])
        _family(out, "textnb_learn_requests_total", "counter",
                "Learn and forget requests acknowledged, by what was asked.",
                [({"action": k}, v) for k, v in learned.items()])
        out += ["# HELP textnb_request_seconds Time from request to answer.",
                "# TYPE textnb_request_seconds histogram"]
        for kind, (counts, total) in sorted(latency.items()):
            cumulative = 0
            for bound, count in zip([*map(repr, BUCKETS), "+Inf"], counts):
                cumulative += count
                out.append(f'textnb_request_seconds_bucket{{kind="{kind}",le="{bound}"}} '
                           f"{cumulative}")
            out.append(f'textnb_request_seconds_sum{{kind="{kind}"}} {total!r}')
            out.append(f'textnb_request_seconds_count{{kind="{kind}"}} {cumulative}')
        self._render_model(out)
        if self.recorder is not None:
            _family(out, "textnb_recorded_verdicts_total", "counter",
                    "Verdicts recorded for the review page, or dropped and why (queue_full, "
                    "locked, full, damaged, error); explained: recorded ones given clues.",
                    [({"outcome": k}, v) for k, v in sorted(self.recorder.counts.items())])
        return "\n".join(out) + "\n"

    def _render_model(self, out: list[str]) -> None:
        served = self._models()
        model = getattr(served, "shared", served)
        in_store = getattr(model, "store_gauges", None)  # a shared store's model: no file
        try:
            written = None if in_store else os.stat(model.path).st_mtime
        except OSError:
            written = None  # not written yet (a first learn creates it): no age to give
        if written is not None:
            _family(out, "textnb_model_age_seconds", "gauge",
                    "Seconds since the served model file was written.",
                    [({}, round(max(0.0, self._clock() - written), 3))])
        _family(out, "textnb_model_reloads_total", "counter",
                "Times a changed model file was loaded after the first load.",
                [({}, max(0, model.loads - 1))])
        n = model.spam_filter.n_learned
        _family(out, "textnb_model_messages", "gauge", "Messages the served model has learned.",
                [({"label": k}, int(n.get(k, 0))) for k in ("spam", "ham")])
        if hasattr(served, "shared"):
            _family(out, "textnb_user_models", "gauge", "Users' own models loaded.",
                    [({}, len(served.loaded()) - 1)])
        if in_store:  # docs/shared-store.md
            log_record, waiting = in_store()
            _family(out, "textnb_store_log_record", "gauge",
                    "The store's numbered log record the served model holds.",
                    [({}, log_record)])
            _family(out, "textnb_store_outbox_waiting", "gauge",
                    "Learns and forgets kept in this host's outbox that the store may "
                    "lack (above 0 for long: the database is away).", [({}, waiting)])


def _family(out: list[str], name: str, kind: str, help_text: str, samples) -> None:
    out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        tags = ",".join(f'{k}="{v}"' for k, v in labels.items())
        out.append(f"{name}{{{tags}}} {value}" if tags else f"{name} {value}")


# -- the port -----------------------------------------------------------------------------

class _BoundedHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most ``max_scrapes`` connections, each closed
    ``scrape_seconds`` after its accept, and accept errors that never spin or stop it."""

    daemon_threads = True
    # socketserver's 5 would leave a flood's connects to the kernel's SYN retries (seconds);
    # accepted, those past the cap are closed at once.
    request_queue_size = 64
    max_scrapes = MAX_SCRAPES
    scrape_seconds = SCRAPE_SECONDS

    def __init__(self, *args, **kwargs):
        from .request_reader import Throttle

        self._open: dict[socket.socket, float] = {}  # connection -> its deadline
        self._open_lock = threading.Lock()
        self._throttle = Throttle(logger=log)
        super().__init__(*args, **kwargs)

    def get_request(self):
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in _RESOURCE_ERRORS:  # the loop would retry at once: pause
                self._throttle.log(logging.ERROR, "metrics port: cannot accept (%s)",
                                   exc.strerror)
                time.sleep(0.1)
            raise  # socketserver drops this attempt and serves on

    def process_request(self, request, client_address):
        with self._open_lock:
            full = len(self._open) >= self.max_scrapes
            if not full:
                self._open[request] = time.monotonic() + self.scrape_seconds
        if full:
            self._throttle.log(logging.INFO, "metrics port: %d scrapes open; connection "
                               "closed", self.max_scrapes)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError as exc:  # "can't start new thread"
            self._throttle.log(logging.ERROR, "metrics port: %s; connection closed", exc)
            self.shutdown_request(request)

    def shutdown_request(self, request):
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self):
        """Between polls (every 0.2 s): cut the connections past their deadline; the
        handler's read then ends and its thread with it."""
        now = time.monotonic()
        with self._open_lock:
            late = [conn for conn, deadline in self._open.items() if deadline <= now]
        for conn in late:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    def handle_error(self, request, client_address):
        self._throttle.log(logging.INFO, "metrics port: a scrape failed", exc_info=True)


def serve_metrics(telemetry: Telemetry, host: str, port: int, *,
                  max_scrapes: int = MAX_SCRAPES,
                  scrape_seconds: float = SCRAPE_SECONDS) -> ThreadingHTTPServer:
    """Answer GET /metrics on host:port (loopback only) from a daemon thread.

    At most ``max_scrapes`` connections at once, each closed ``scrape_seconds`` after
    it was accepted. RETURNS the server (``.server_address`` has the port chosen for
    0; ``shutdown()`` and ``server_close()`` stop it).
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise MetricsError(f"metrics host {host!r} is not an IP address; use 127.0.0.1 "
                           "or ::1") from None
    if not address.is_loopback:
        raise MetricsError(f"metrics host {host} is not a loopback address; the numbers "
                           "tell anyone how much mail each label gets, so scrape through "
                           "127.0.0.1 (a Prometheus on another host: a reverse proxy or "
                           "an SSH tunnel)")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is here")
                return
            try:
                body = telemetry.render().encode("utf-8")
            except Exception:  # noqa: BLE001 - a failed scrape must not stop the daemon
                log.exception("cannot render the metrics")
                self.send_error(500)
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # scrapes every 15 s would flood the daemon's log
            pass

    Handler.timeout = scrape_seconds  # each read; service_actions bounds the whole
    attributes = {"max_scrapes": max_scrapes, "scrape_seconds": scrape_seconds}
    if address.version == 6:
        attributes["address_family"] = socket.AF_INET6
    server_class = type("MetricsServer", (_BoundedHTTPServer,), attributes)
    try:
        server = server_class((host, port), Handler)
    except OSError as exc:
        raise MetricsError(f"cannot open the metrics port {host}:{port}: "
                           f"{exc.strerror or exc}") from None
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                     name="textnb-metrics", daemon=True).start()
    return server


def parse_metrics_address(spec: str) -> tuple[str, int]:
    """'PORT', 'HOST:PORT' or '[::1]:PORT' -> (host, port); host default 127.0.0.1."""
    host, sep, port = spec.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", spec
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise MetricsError(f"--metrics {spec!r} is not [HOST:]PORT (e.g. 9433 or 127.0.0.1:9433)")
    return host or "127.0.0.1", int(port)
