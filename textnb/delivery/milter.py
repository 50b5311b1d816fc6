"""The milter: Postfix and Sendmail ask textnb for a verdict while the mail is still in SMTP.

Built on pymilter (Sendmail's libmilter, the protocol's reference implementation,
wrapped for Python; docs/milter.md says why this and not a pure-Python library).
libmilter runs one thread per MTA connection and calls the methods of
:class:`MilterSession`; everything else here is plain Python.

- **Same verdict as** ``textnb filter``. The session rebuilds the message from the
  header fields and body the MTA sends (``Name: value`` lines, CRLF turned back into
  LF as the message is stored and delivered) and scores it with
  :func:`textnb.delivery.verdict_headers.score_with` on a
  :class:`textnb.delivery.server.ResidentModel`, the resident scorer's model, reloaded when its file
  changes, as ``serve`` does. The fields added are
  :func:`textnb.delivery.verdict_headers.verdict_fields`, ``filter``'s own, and earlier fields of
  those names (forged by a sender, or left by an upstream
  filter) are deleted first, as ``filter`` drops them.
- **Never eats mail.** Any fault (a scoring exception, no verdict within ``timeout``,
  an MTA that does not let us add headers) accepts the message unchanged, or, with
  ``on_error='tempfail'``, answers 4xx so that the sender retries. A message over
  ``max_bytes`` is accepted unscored and unchanged as soon as it crosses the bound
  (the MTA stops sending it), like ``spamc``'s size limit; the log says so.
- **Per-user models.** Given a ModelSet (``--models DIR``), the envelope recipients
  choose the model (:func:`textnb.delivery.users.user_from_recipients`): one user, that user's
  model (the shared one while they have none); recipients of several users, the
  shared model, since one copy of the message with one set of fields reaches them all.
- **Actions.** Off by default. Above a P(spam) the operator chooses (``reject_above``,
  ``quarantine_above``), compared as log-odds, so that P values near 1 stay exact:
  reject with 550 5.7.1, or quarantine (Postfix's hold queue) with the headers added.
- **Bounds.** Scoring runs on one worker thread, one message at a time (as ``serve``:
  it holds the GIL anyway and the tokenizer's caches are not for threads); a message
  waits for it at most ``timeout`` seconds in all. The MTA bounds the number of
  sessions (Postfix: one per smtpd process, ``default_process_limit`` = 100).
- **Shutdown.** On SIGTERM (or SIGINT, SIGHUP) :func:`run_milter` waits up to
  ``timeout`` for the messages in flight (a header or body received, no end yet) to
  be answered, then stops libmilter and returns. It cannot stop accepting first:
  Debian's libmilter serves its sessions from a pool whose manager thread quits on
  ``smfi_stop``, so a message still in flight then would never be answered (measured:
  the MTA side waited 15 s and got a reset). A message begun during the wait is
  served too; a connection left idle is closed (Postfix then applies
  ``milter_default_action`` to that SMTP session's next message).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import Milter

from ..features.lazy_scipy import import_now
from .milter_options import MilterError, MilterPolicy, parse_socket
from .users import user_from_recipients
from .verdict_headers import describe_error, score_with, verdict_fields

__all__ = ["DONE", "MilterPolicy", "MilterError", "MilterScorer", "MilterSession", "parse_socket",
           "action_for", "message_bytes", "run_milter"]

log = logging.getLogger("textnb.delivery.milter")

# Scoring's SciPy modules, imported before any handler thread scores (lazy_import).
import_now("scipy.sparse", "scipy.special")

# Each stops the milter once the messages in flight are answered (libmilter treats
# SIGHUP as a stop too).
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
REJECT_REPLY = ("550", "5.7.1", "Message refused as spam (textnb)")
# What the verdict log's 'action' says the milter did, by action_for's answer: the review
# page offers to release 'quarantined' mail by its queue id.
DONE = {"reject": "rejected", "quarantine": "quarantined", None: "delivered"}
# Recipients kept per message for choosing a user's model; past this many the message is
# a list's or a broadcast and gets the shared model anyway (several users' recipients do).
MAX_RECIPIENTS = 100


def _logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def action_for(verdict, policy: MilterPolicy) -> str | None:
    """'reject', 'quarantine' or None (deliver with headers) for a verdict.

    Only spam verdicts qualify; a P below the decision's own threshold therefore acts
    as the threshold. P(spam) > P is tested as log-odds > ln(P / (1 - P)): P(spam)
    rounds to 1.0 long before the log-odds stop growing.
    """
    if verdict.label != "spam":
        return None
    for action, p in (("reject", policy.reject_above), ("quarantine", policy.quarantine_above)):
        if p is not None and verdict.log_odds > _logit(p):
            return action
    return None


def message_bytes(headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    """The message as delivery would store it, from the fields and body the MTA sent.

    headers: (name, value) as libmilter passes them (the space after the colon
    removed, folded values with their line breaks). SMTP's CRLF becomes LF, as in
    Postfix's queue files and in what ``textnb filter`` reads from a delivery agent.
    """
    head = b"".join(name + b": " + value + b"\n" for name, value in headers)
    return (head + b"\n" + body).replace(b"\r\n", b"\n")


class MilterScorer:
    """Verdicts from a ResidentModel on one worker thread, each within ``timeout``.

    model (ResidentModel | ModelSet): what scores (reloaded by :meth:`watch`).
    policy (MilterPolicy): the cost ratio and timeout.
    telemetry (Telemetry | None): counts messages, verdicts and latency (textnb.delivery.telemetry).
    recorder (VerdictRecorder | None): is given each verdict, what was done with the
        message and its queue id (textnb.review.recorder: never blocks, never fails the
        message).
    """

    def __init__(self, model, policy: MilterPolicy, telemetry=None, recorder=None):
        self.model, self.policy, self.telemetry = model, policy, telemetry
        self.recorder = recorder
        self.messages = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="textnb-score")

    def score(self, raw: bytes, user: str | None = None):
        """The Verdict (from ``user``'s model, None: the shared or only one), recorded
        with the action it leads to; TimeoutError when none came within the policy's
        timeout. (A session records after acting, with the queue id: :meth:`scored`.)"""
        scored = self.scored(raw, user)
        self.record(scored, raw, user, DONE[action_for(scored[0], self.policy)])
        return scored[0]

    def scored(self, raw: bytes, user: str | None = None) -> tuple:
        """(Verdict, the model that gave it, which model: 'model', 'shared' or 'user'),
        unrecorded; TimeoutError as :meth:`score`."""
        future = self._pool.submit(self._score, raw, user)
        try:
            return future.result(timeout=self.policy.timeout)
        except FutureTimeout:
            future.cancel()  # if still queued; a running one finishes, unheard
            raise TimeoutError(f"no verdict within {self.policy.timeout:g} s "
                               "(--timeout)") from None

    def record(self, scored: tuple, raw: bytes, user: str | None, done: str,
               queue_id: str | None = None) -> None:
        """Give the recorder (if any) a verdict from :meth:`scored` and what was done
        with the message (``DONE``'s words); never blocks, never raises."""
        if self.recorder is not None:
            verdict, model, source = scored
            self.recorder.submit(raw, verdict, user=user, model=source, source="milter",
                                 action=done, explainer=model, queue_id=queue_id)

    def _score(self, raw: bytes, user: str | None):
        model, source = self.model.for_scoring(user)  # a user's model loads here, on first use
        with model.lock:  # uncontended, unless the recorder's writer explains a verdict
            verdict = score_with(model.spam_filter, raw, self.policy.cost_ratio)
        self.messages += 1  # one worker thread: no race
        return verdict, model, source

    def watch(self, stop: threading.Event, interval: float) -> threading.Thread | None:
        """Check the model file every ``interval`` seconds until ``stop`` (0: never)."""
        if not interval:
            return None

        def loop():
            while not stop.wait(interval):
                for model in self.model.loaded():
                    model.check()

        thread = threading.Thread(target=loop, name="textnb-reload", daemon=True)
        thread.start()
        return thread

    def observe(self, kind: str, seconds: float | None = None, label: str | None = None):
        if self.telemetry is not None:
            self.telemetry.observe(kind, seconds, label)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class _InFlight:
    """How many messages are between their first header and their answer."""

    def __init__(self):
        self.open = 0
        self._changed = threading.Condition()

    def add(self, n: int) -> None:
        with self._changed:
            self.open += n
            self._changed.notify_all()

    def drain(self, seconds: float) -> int:
        """Wait until none is open or ``seconds`` pass; RETURNS how many are still open."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while self.open and self._changed.wait(max(0.0, deadline - time.monotonic())):
                pass
            return self.open


class MilterSession(Milter.Base):
    """One MTA connection (possibly several messages), as libmilter calls it.

    Every callback goes through :meth:`_guarded`: an exception accepts the message
    unchanged (or tempfails it), never reaches libmilter.
    """

    def __init__(self, scorer: MilterScorer, policy: MilterPolicy, in_flight: _InFlight,
                 recipient_user: str | None = None):
        self.scorer, self.policy, self.in_flight = scorer, policy, in_flight
        self.recipient_user = recipient_user
        self._error_reply = Milter.TEMPFAIL if policy.on_error == "tempfail" else Milter.ACCEPT
        # lower-case name -> the name to delete it by (MTAs match names case-blind)
        self._replaced = {name.lower(): name.decode("ascii") for name in policy.replaced}
        self._started = False
        self._reset()

    def _reset(self) -> None:
        """Forget the message: answered, aborted, or accepted unscored."""
        if self._started:
            self.in_flight.add(-1)
        self._started = False
        self._fields: list[tuple[bytes, bytes]] = []
        self._chunks: list[bytes] = []
        self._size = 0
        self._seen: Counter = Counter()  # the message's own fields of the names we replace
        self._recipients: list[str] = []

    def _guarded(self, step, *args):
        try:
            return step(*args)
        except Exception as exc:  # noqa: BLE001 - a milter must never eat mail: any fault
            # accepts the message unchanged (or tempfails it, if so configured).
            log.error("%s: %s; message %s", self._queue_id(), describe_error(exc),
                      "tempfailed" if self._error_reply == Milter.TEMPFAIL
                      else "accepted unchanged")
            self._reset()
            self.scorer.observe("error")
            return self._error_reply

    def _queue_id(self) -> str:
        try:
            return self.getsymval("i") or "NOQUEUE"
        except Exception:  # noqa: BLE001 - only for the log line; outside a session
            return "NOQUEUE"

    def _grow(self, n: int) -> bool:
        """Count n more bytes; False (and the message dropped) once over max_bytes."""
        if not self._started:
            self._started = True
            self.in_flight.add(1)
        self._size += n
        if self._size <= self.policy.max_bytes:
            return True
        log.warning("%s: message over %d bytes (--max-bytes) accepted unscored and "
                    "unchanged", self._queue_id(), self.policy.max_bytes)
        self._reset()
        self.scorer.observe("unscored")
        return False

    # -- callbacks (libmilter's threads) --------------------------------------------
    def envfrom(self, sender, *params):
        # A new transaction: recipients of an earlier one that ended without a message
        # (RSET, or every recipient refused) must not choose this one's model.
        self._recipients = []
        return Milter.CONTINUE

    def envrcpt(self, to, *params):
        return self._guarded(self._envrcpt, to)

    def _envrcpt(self, to):
        if self._recipients is not None and len(self._recipients) < MAX_RECIPIENTS:
            self._recipients.append(to)
        else:  # more than any one user's mail: the shared model (user_from_recipients)
            self._recipients = None
        return Milter.CONTINUE

    @Milter.decode("bytes")
    def header(self, field, value):
        return self._guarded(self._header, field, value)

    def _header(self, field, value):
        name = field.encode("utf-8", "surrogateescape") if isinstance(field, str) else field
        value = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
        if not self._grow(len(name) + len(value) + 3):
            return Milter.ACCEPT
        self._fields.append((name, value))
        if name.lower() in self._replaced:
            self._seen[self._replaced[name.lower()]] += 1
        return Milter.CONTINUE

    def body(self, chunk):
        return self._guarded(self._body, chunk)

    def _body(self, chunk):
        if not self._grow(len(chunk) + (0 if self._chunks else 1)):
            return Milter.ACCEPT
        self._chunks.append(bytes(chunk))
        return Milter.CONTINUE

    def eom(self):
        return self._guarded(self._eom)

    def _eom(self):
        try:
            return self._answer(message_bytes(self._fields, b"".join(self._chunks)), self._seen)
        finally:
            self._reset()  # after the answer: a shutdown waits for it

    def _answer(self, raw: bytes, seen: Counter):
        started = time.monotonic()
        user = None
        if self.recipient_user and self._recipients:
            user = user_from_recipients(self._recipients, self.recipient_user)
        scored = self.scorer.scored(raw, user)
        verdict = scored[0]
        self.scorer.observe("message", time.monotonic() - started, verdict.label)
        action = action_for(verdict, self.policy)
        qid = self._queue_id()
        log.info("%s: %s log-odds=%.3f%s%s", qid, verdict.label, verdict.log_odds,
                 f" user={user}" if user else "", f" ({DONE[action]})" if action else "")
        if action == "reject":
            self.setreply(*REJECT_REPLY)
            self.scorer.record(scored, raw, user, DONE[action], qid)
            return Milter.REJECT
        fields = [(n.decode("ascii"), v.decode("ascii"))
                  for n, v in verdict_fields(verdict, self.policy.spamassassin)]
        if not self._actions & Milter.ADDHDRS:
            raise MilterError("the MTA does not let the milter add header fields")
        if seen and self._actions & Milter.CHGHDRS:
            for name, count in seen.items():
                for index in range(count, 0, -1):  # from the last: indexes stay valid
                    self.chgheader(name, index, None)
        elif seen:
            log.warning("%s: the MTA does not let the milter delete the message's own "
                        "%s fields; they stay", qid, ", ".join(seen))
        for name, value in fields:
            self.addheader(name, value)
        if action == "quarantine":
            self.quarantine(f"spam, P(spam) > {self.policy.quarantine_above} (textnb)")
        # recorded once done: a fault above accepts the message unchanged, unrecorded,
        # so a row never says 'quarantined' of mail that was delivered
        self.scorer.record(scored, raw, user, DONE[action], qid)
        return Milter.CONTINUE

    def abort(self):
        self._reset()
        return Milter.CONTINUE

    def close(self):
        self._reset()
        return Milter.CONTINUE


# -- the socket ------------------------------------------------------------------------

def _prepare_unix(path: Path) -> None:
    """Refuse a shared folder or a live socket; remove a stale one (serve's rules)."""
    from .server import ScorerServer

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    ScorerServer._check_socket_folder(path.parent)
    if path.exists() or path.is_symlink():
        ScorerServer._clear_stale_socket(path)


def run_milter(model, spec: str, policy: MilterPolicy, *, allow_remote: bool = False,
               reload_interval: float = 1.0, name: str = "textnb", started=None,
               recipient_user: str | None = None, telemetry=None, recorder=None) -> int:
    """Serve the milter on ``spec`` until SIGTERM or SIGINT; RETURNS the messages scored.

    model (ResidentModel | ModelSet): the model, or the users' models, loaded.
    recipient_user (str | None): with a ModelSet, how a recipient names its user
    ('local' or 'address', textnb.delivery.users.user_from_recipients); None: never a user's model.
    telemetry (Telemetry | None): what the metrics port reports.
    recorder (VerdictRecorder | None): records each verdict (``--record``).
    started (Callable[[], None] | None):
    called once the socket is about to open (the CLI prints its banner there).
    Called from the main thread, it installs handlers for STOP_SIGNALS that stop
    libmilter (``smfi_stop``); libmilter itself runs on a thread of its own.
    """
    import milter  # pymilter's C module

    policy = policy.check()
    spec, unix_path = parse_socket(spec, allow_remote)
    if reload_interval < 0:
        raise MilterError(f"reload interval {reload_interval} must be >= 0 (0: never)")
    if unix_path is not None:
        _prepare_unix(unix_path)
    scorer = MilterScorer(model, policy, telemetry, recorder)
    in_flight = _InFlight()
    stop, stopping = threading.Event(), threading.Event()
    Milter.factory = lambda: MilterSession(scorer, policy, in_flight, recipient_user)
    # The last line of defence: a fault outside our guards still follows --on-error.
    milter.set_exception_policy(Milter.TEMPFAIL if policy.on_error == "tempfail"
                                else Milter.ACCEPT)
    failure: list[BaseException] = []

    def serve():
        try:
            Milter.runmilter(name, spec, rmsock=False)
        except milter.error as exc:
            failure.append(MilterError(f"cannot listen on {spec}: {exc} (in use, or no "
                                       "permission?)"))
        finally:
            stop.set()

    if threading.current_thread() is threading.main_thread():
        # Why not libmilter's own signal thread: it blocks SIGTERM only in the threads
        # it starts, and NumPy's BLAS threads (started on import) would take the signal
        # with its default action, killing the process with sessions in flight.
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda *_: stopping.set())
    watcher = scorer.watch(stop, reload_interval)
    # A unix socket for the MTA's user (its group): born 0660, never wider.
    old_umask = os.umask(0o117) if unix_path is not None else None
    if started is not None:
        started()
    runner = threading.Thread(target=serve, name="textnb-libmilter", daemon=True)
    runner.start()
    try:
        still_open = 0
        while not stop.wait(0.2):  # the main thread stays in Python: signal handlers run
            if stopping.is_set():
                still_open = in_flight.drain(policy.timeout)
                milter.stop()
                break
        runner.join()
    finally:
        if old_umask is not None:
            os.umask(old_umask)
        stop.set()
        if watcher is not None:
            watcher.join(policy.timeout)
        scorer.close()
        if unix_path is not None:
            unix_path.unlink(missing_ok=True)
        log.info("milter stopped after %d messages%s", scorer.messages,
                 f"; {still_open} messages in flight cut off" if still_open else "")
    if failure:
        raise failure[0]
    return scorer.messages
