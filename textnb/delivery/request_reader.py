"""The scorer's front door: every connection read at once, only complete requests answered.

A client that connects and then sends nothing, or one byte a second, must not hold
anything the scorer needs to answer the others (docs/security.md lists the attacks).
So :class:`RequestReader` reads every connection from one thread with a selector, and
hands a request to the :class:`WorkerPool` (``max_clients`` threads: scoring, learning,
a user's model loading) only once all its bytes are in:

- **Accepting.** Non-blocking. Out of descriptors or memory (EMFILE, ENFILE, ENOMEM,
  ENOBUFS) is logged, accepting pauses (50 ms, doubling up to 1 s while it lasts) and
  the connections already open are served meanwhile; pending network errors that
  Linux hands to ``accept`` are skipped, as accept(2) advises. At most
  ``max_connections`` are open at once; later ones wait in the listen backlog.
- **The request line** must end within ``MAX_LINE`` bytes, however much one read
  returns. Its length field is refused by its number of digits before ``int`` sees it.
- **One deadline per request**, ``timeout`` seconds from its accept to its last byte:
  a client that trickles gets no more time than one that is silent.
- **Memory.** Bytes read and not yet answered are at most ``max_buffered``; a read
  past that is refused with ERROR (the client then scores in process).
- **Every refusal is an ERROR line**, never a traceback; lines about misbehaving
  clients go through :class:`Throttle`, so a flood of them cannot flood the log.
"""

from __future__ import annotations

import errno
import logging
import queue
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field

from .client import MAX_LINE, PROTOCOL, reply_line

__all__ = ["BadRequest", "Request", "RequestReader", "Throttle", "WorkerPool", "parse_head"]

log = logging.getLogger("textnb.delivery.server")

# accept() errors that mean "out of a resource for now": pause accepting, keep serving.
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
# The listening socket itself is gone: nothing more can be accepted.
FATAL_ACCEPT_ERRORS = frozenset({errno.EBADF, errno.EINVAL, errno.ENOTSOCK})
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 1.0
# Connections accepted per wake-up, so that a burst of connects does not keep the loop
# from reading the connections already open.
ACCEPT_BURST = 64
# How long the loop sleeps at most between looks at ``stop`` and at the deadlines.
POLL_SECONDS = 0.2
VERBS = (b"SCORE", b"LEARN", b"FORGET", b"STATE", b"PING")


class BadRequest(Exception):
    """A request the scorer refuses by its request line alone; the text is the ERROR reply."""


@dataclass
class Request:
    """One complete request, as the reader hands it to a worker.

    verb (bytes): SCORE, LEARN, FORGET, STATE or PING. words (list[bytes]): the request line's
    words without ``user=`` and ``nonce=``. user (str | None): the name given by ``user=``.
    message (bytes): the ``length`` bytes after the line. started (float): when the
    request line was read (monotonic). deadline (float): its accept + ``timeout``.
    held (int): bytes counted against ``max_buffered`` until :meth:`RequestReader.release`.
    """

    conn: socket.socket
    verb: bytes
    words: list[bytes]
    user: str | None
    message: bytes
    started: float
    deadline: float
    held: int = 0
    nonce: bytes | None = None  # a client with a key: the reply carries its MAC


def parse_head(line: bytes, max_bytes: int):
    """The request line -> (verb, words, user, length, nonce); BadRequest with the
    reply's text.

    The length's digits are counted before ``int`` converts them (leading zeros
    aside), so that no request can make the scorer convert a number of any size.
    """
    words = line.split()
    user = nonce = None
    if len(words) > 2 and words[-1].startswith(b"nonce="):
        nonce = words.pop()[len(b"nonce="):]
        if not (16 <= len(nonce) <= 128 and all(c in b"0123456789abcdef" for c in nonce)):
            raise BadRequest(f"nonce {nonce[:40]!r} must be 16-128 lower-case hex digits")
    if len(words) > 2 and words[-1].startswith(b"user="):
        user = words.pop()[len(b"user="):].decode("utf-8", "replace")
    if len(words) < 2 or words[0] != PROTOCOL:
        raise BadRequest(f"expected '{PROTOCOL.decode()} SCORE <length>' or "
                         f"'{PROTOCOL.decode()} PING'")
    verb = words[1]
    if verb == b"PING" and len(words) == 2:
        return verb, words, user, 0, nonce
    if verb == b"SCORE" and len(words) in (3, 4):
        digits = words[2]
    elif verb == b"LEARN" and len(words) == 4 and words[2] in (b"spam", b"ham"):
        digits = words[3]
    elif verb in (b"FORGET", b"STATE") and len(words) == 3:
        digits = words[2]
    else:
        raise BadRequest(f"bad request {line[:60]!r}")
    if not digits.isdigit():
        raise BadRequest(f"bad request {line[:60]!r}")
    if len(digits.lstrip(b"0")) > len(str(max_bytes)):
        raise BadRequest(f"message length of {len(digits)} digits exceeds the scorer's "
                         f"limit of {max_bytes} (--max-bytes)")
    length = int(digits)
    if length > max_bytes:
        raise BadRequest(f"message of {length} bytes exceeds the scorer's limit of "
                         f"{max_bytes} (--max-bytes)")
    if verb == b"SCORE" and len(words) == 4:
        try:
            ratio = float(words[3])
        except ValueError:
            ratio = float("nan")
        if not 0 < ratio < float("inf"):
            raise BadRequest(f"cost ratio {words[3][:40]!r} must be a number > 0 and finite")
    return verb, words, user, length, nonce


class Throttle:
    """At most ``burst`` log lines per ``seconds`` for one kind of event; the rest counted.

    A client can cause a log line at will (a bad request, a hang-up); bounded, the
    log stays readable and small whatever arrives. The first line of each new window
    says how many were left out in the last.
    """

    def __init__(self, burst: int = 10, seconds: float = 60.0, clock=time.monotonic,
                 logger: logging.Logger = log):
        self.burst, self.seconds, self._clock, self._log = burst, seconds, clock, logger
        self._window_end = 0.0
        self._count = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def log(self, level: int, text: str, *args, exc_info: bool = False) -> None:
        with self._lock:
            now = self._clock()
            if now >= self._window_end:
                dropped, self._dropped = self._dropped, 0
                self._window_end, self._count = now + self.seconds, 0
                if dropped:
                    self._log.log(level, "%d more lines like the next were left out in the last "
                                   "%g s", dropped, self.seconds)
            self._count += 1
            if self._count > self.burst:
                self._dropped += 1
                return
        self._log.log(level, text, *args, exc_info=exc_info)


class WorkerPool:
    """Up to ``size`` threads calling ``work(item)``, each started when an item finds no
    idle thread (as ThreadPoolExecutor does).

    A thread that cannot start (RuntimeError: a pids cgroup such as systemd's TasksMax,
    or out of memory) is logged; the item waits for a running thread, or, when there is
    none, :meth:`submit` returns False and the caller sheds it.
    """

    def __init__(self, size: int, work, name: str = "textnb-worker"):
        self.size, self._work, self._name = size, work, name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self.threads: list[threading.Thread] = []  # only threads that started
        self._throttle = Throttle()

    def submit(self, item) -> bool:
        if not self._idle.acquire(blocking=False) and len(self.threads) < self.size:
            thread = threading.Thread(target=self._run, name=f"{self._name}-{len(self.threads)}",
                                      daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread"
                self._throttle.log(logging.ERROR, "cannot start a worker thread (%s); %d "
                                   "running", exc, len(self.threads))
                if not self.threads:
                    return False
            else:
                self.threads.append(thread)
        self._queue.put(item)
        return True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._work(item)
            except Exception:  # noqa: BLE001 - one request's fault must not end a worker
                self._throttle.log(logging.ERROR, "unexpected error in a worker", exc_info=True)
            self._idle.release()

    def stop(self, seconds: float) -> int:
        """Let the queued items finish, up to ``seconds``; RETURNS the threads still busy."""
        for _ in self.threads:
            self._queue.put(None)
        deadline = time.monotonic() + seconds
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(thread.is_alive() for thread in self.threads)


@dataclass
class _Conn:
    sock: socket.socket
    deadline: float
    buffer: bytearray = field(default_factory=bytearray)
    head: tuple | None = None  # parse_head's result, once the line is in
    line_end: int = 0  # the index after the request line's newline
    started: float = 0.0


class RequestReader:
    """Read requests from ``listener`` until ``stop``; call ``handle(Request)`` for each
    complete one (from this thread: it must not block).

    handle (Callable[[Request], None]): takes over the request's socket.
    observe (Callable[[bytes, float | None], None] | None): each refusal this reader sends.
    """

    def __init__(self, listener: socket.socket, handle, *, max_bytes: int, timeout: float,
                 max_connections: int, max_buffered: int, observe=None):
        self.listener, self._handle, self._observe = listener, handle, observe
        self.max_bytes, self.timeout = max_bytes, timeout
        self.max_connections, self.max_buffered = max_connections, max_buffered
        self.connections: dict[int, _Conn] = {}  # by fd, in accept order = deadline order
        self.buffered = 0
        self._buffered_lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._accepting = False
        self._resume_at = 0.0
        self._backoff = BACKOFF_FIRST
        self.accept_errors = 0
        self._throttles = {kind: Throttle() for kind in ("accept", "client")}

    # -- the loop ----------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop``; then read the connections open to their end or deadline."""
        self.listener.setblocking(False)
        try:
            while not stop.is_set() or self.connections:
                if stop.is_set():
                    self._pause_accepting(forever=True)
                else:
                    self._maybe_resume()
                for key, _ in self._selector.select(self._wait()):
                    if key.fileobj is self.listener:
                        self._accept()
                    else:
                        self._read(key.data)
                self._expire(time.monotonic())
        finally:
            for conn in list(self.connections.values()):
                self._drop(conn)
            self._selector.close()

    def _wait(self) -> float:
        now = time.monotonic()
        wait = POLL_SECONDS
        if self.connections:
            wait = min(wait, next(iter(self.connections.values())).deadline - now)
        if not self._accepting and len(self.connections) < self.max_connections:
            wait = min(wait, self._resume_at - now)  # at the cap, a closing one resumes it
        return max(0.0, wait)

    # -- accepting ---------------------------------------------------------------------
    def _maybe_resume(self) -> None:
        if (not self._accepting and len(self.connections) < self.max_connections
                and time.monotonic() >= self._resume_at):
            self._selector.register(self.listener, selectors.EVENT_READ)
            self._accepting = True

    def _pause_accepting(self, forever: bool = False, seconds: float = 0.0) -> None:
        if self._accepting:
            self._selector.unregister(self.listener)
            self._accepting = False
        self._resume_at = float("inf") if forever else time.monotonic() + seconds

    def _accept(self) -> None:
        for _ in range(ACCEPT_BURST):
            if len(self.connections) >= self.max_connections:
                self._pause_accepting()  # resumed as soon as one closes
                return
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.accept_errors += 1
                if exc.errno in FATAL_ACCEPT_ERRORS:
                    raise
                if exc.errno in RESOURCE_ERRORS:
                    self._throttles["accept"].log(
                        logging.ERROR, "cannot accept a connection (%s); pausing %.2f s, "
                        "serving the %d open", exc.strerror, self._backoff, len(self.connections))
                    self._pause_accepting(seconds=self._backoff)
                    self._backoff = min(BACKOFF_MAX, self._backoff * 2)
                    return
                continue  # a network error pending on that connection: the next one
            self._backoff = BACKOFF_FIRST
            self._open(sock)

    def _open(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic() + self.timeout)
            self._selector.register(sock, selectors.EVENT_READ, conn)
        except OSError as exc:  # epoll out of memory or watches: this one cannot be read
            self._throttles["accept"].log(logging.ERROR, "cannot watch a connection (%s); "
                                          "closed", exc.strerror or exc)
            sock.close()
            return
        self.connections[sock.fileno()] = conn

    # -- reading -----------------------------------------------------------------------
    def _read(self, conn: _Conn) -> None:
        if conn.head is None:
            size = 65536
        else:
            size = min(1 << 20, conn.line_end + conn.head[3] - len(conn.buffer))
        try:
            chunk = conn.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._throttles["client"].log(logging.INFO, "client dropped: %s", exc.strerror or exc)
            self._drop(conn)
            return
        if not chunk:  # the client hung up before its request was complete
            self._drop(conn)
            return
        if not self._take(len(chunk)):
            self._refuse(conn, f"scorer busy: {self.max_buffered} bytes of requests in "
                               "hand; try again")
            return
        conn.buffer += chunk
        if conn.head is None and not self._read_head(conn):
            return
        if len(conn.buffer) >= conn.line_end + conn.head[3]:
            self._complete(conn)

    def _read_head(self, conn: _Conn) -> bool:
        """Parse the request line once it is in; False while it is not (or refused)."""
        end = conn.buffer.find(b"\n", 0, MAX_LINE)
        if end < 0:
            if len(conn.buffer) >= MAX_LINE:
                self._refuse(conn, f"no request line within {MAX_LINE} bytes")
            return False
        conn.started = time.monotonic()
        try:
            conn.head = parse_head(bytes(conn.buffer[:end]), self.max_bytes)
        except BadRequest as exc:
            self._refuse(conn, str(exc))
            return False
        conn.line_end = end + 1
        return True

    def _complete(self, conn: _Conn) -> None:
        self._forget(conn)
        verb, words, user, length, nonce = conn.head
        with memoryview(conn.buffer) as view:  # one copy of a message of up to --max-bytes
            message = bytes(view[conn.line_end:conn.line_end + length])
        held = len(conn.buffer)
        conn.buffer = bytearray()
        request = Request(conn.sock, verb, words, user, message, conn.started, conn.deadline,
                          held, nonce)
        try:
            conn.sock.setblocking(True)
            self._handle(request)
        except Exception:  # noqa: BLE001 - the loop serves everyone else whatever happens
            log.exception("cannot hand a request on")
            self.release(held)
            conn.sock.close()

    def _expire(self, now: float) -> None:
        while self.connections:
            conn = next(iter(self.connections.values()))
            if conn.deadline > now:
                return
            self._throttles["client"].log(logging.INFO, "client dropped: request not complete "
                                          "within %g s (--timeout)", self.timeout)
            self._refuse(conn, f"request not complete within {self.timeout:g} s (--timeout)",
                         log_it=False)

    # -- closing -----------------------------------------------------------------------
    def _refuse(self, conn: _Conn, text: str, log_it: bool = True) -> None:
        """Send ERROR (if the socket takes it at once) and close."""
        if log_it:
            self._throttles["client"].log(logging.INFO, "request refused: %s", text[:200])
        reply = reply_line("ERROR", text)
        try:
            conn.sock.send(reply)
        except OSError:
            pass  # gone, or not reading: closed all the same
        if self._observe is not None:
            self._observe(reply, None)
        self._drop(conn)

    def _forget(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if self.connections.pop(fd, None) is not None:
            self._selector.unregister(conn.sock)

    def _drop(self, conn: _Conn) -> None:
        self._forget(conn)
        self.release(len(conn.buffer))
        conn.buffer = bytearray()
        conn.sock.close()

    # -- the memory bound --------------------------------------------------------------
    def _take(self, n: int) -> bool:
        with self._buffered_lock:
            if self.buffered + n > self.max_buffered:
                return False
            self.buffered += n
            return True

    def release(self, n: int) -> None:
        """Give back ``n`` bytes of the bound (a worker calls it with ``Request.held``)."""
        if n:
            with self._buffered_lock:
                self.buffered -= n
