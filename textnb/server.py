"""The resident scorer: the model and tokenizer loaded once, verdicts over a socket.

Loading a model and building spaCy's tokenizer costs most of a second; scoring a
message costs milliseconds. ``textnb serve`` pays the first cost once and answers
:mod:`textnb.client` requests (the protocol is described there) for as long as it runs.

- **Where it listens.** A Unix socket by default, created owner-only (mode 0600), so
  only its user can ask, in a folder no other user can write to (or a sticky one,
  as /tmp), so none can swap in a socket of their own; or TCP on a loopback
  address. A non-loopback address is refused unless asked for explicitly: the
  protocol has no authentication.
- **Bounds.** A message longer than ``max_bytes`` is refused (the client then scores
  in process); at most ``max_clients`` connections are served at once, later ones
  wait in the listen backlog (as long as the kernel allows); a client has
  ``timeout`` seconds to send its request, however slowly it trickles in. A request
  that is not the protocol, a length that is not a number, or a cost ratio that is
  not a finite number > 0 gets an ERROR reply. Scoring runs one message at a time
  under a lock (it holds the GIL anyway, and the tokenizer's caches are not meant
  for threads).
- **Reloads.** A watcher thread stats the model file every ``reload_interval``
  seconds; when its inode, size or mtime changes (``textnb train`` renames a new
  file into place) the new model is loaded and warmed up beside the old one and
  then swapped in with one assignment: requests in flight finish on the old model,
  none waits for the load. A damaged new file is logged and the old model kept.
  The same reload renews the tokenizer when spaCy's vocabulary has grown past
  ``MAX_STRINGS`` (it keeps every string it has seen).
- **Shutdown.** When ``stop`` is set (the CLI sets it on SIGTERM or SIGINT) the
  server stops accepting, lets the requests in flight finish (up to ``timeout``),
  removes its socket file and returns.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path

from .client import MAX_LINE, MAX_MESSAGE_BYTES, PROTOCOL, reply_line
from .errors import TextnbError
from .filter import describe_error, score_with

log = logging.getLogger("textnb.server")

# How often the accept loop and the reload watcher wake up to look at ``stop``: the
# longest a SIGTERM waits before the server begins to shut down.
POLL_SECONDS = 0.2
# Scored once on every (re)load, so that spaCy's tokenizer and the vocabulary's first
# lookups are built before the model serves a request, not during one.
_WARM_UP = b"Subject: warm-up\nFrom: textnb <textnb@localhost>\n\nwarm up http://example.com/ $10\n"
# spaCy's vocabulary keeps every distinct string it has tokenised, and mail brings new
# ones in every message: scoring the 6,047 SpamAssassin messages adds 114,000 strings
# and 115 MB; 3,000 messages of 200 random words add 600,000 strings and 370 MB. So
# past this many strings the scorer starts afresh from the model file (a reload).
MAX_STRINGS = 500_000


class ServerError(TextnbError):
    """The scorer cannot start: the address is taken, not allowed, or not a socket."""


class ResidentModel:
    """The loaded model, replaced when its file changes.

    path (Path): the model file.
    load (Callable[[Path], SpamFilter]): the loader; default ``textnb.store.load``.
    max_strings (int): reload, to free memory, once the tokenizer holds this many strings.
    """

    def __init__(self, path, load=None, max_strings: int = MAX_STRINGS):
        if load is None:
            from .store import load
        self.path = Path(path)
        self._load = load
        self.max_strings = max_strings
        self.loads = 0
        try:
            self._key = self._stat_key()  # before the load: a change during it is seen later
        except FileNotFoundError:
            self._key = None  # the loader's error names the missing file and the fix
        self.spam_filter = self._load_warm()

    def _stat_key(self):
        st = os.stat(self.path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _load_warm(self):
        spam_filter = self._load(self.path)
        score_with(spam_filter, _WARM_UP)
        self.loads += 1
        return spam_filter

    def strings(self) -> int:
        """How many strings the tokenizer's spaCy vocabulary holds (its memory)."""
        return len(self.spam_filter.tokenizer.spacy.vocab.strings)

    def check(self) -> bool:
        """Reload if the file changed or the tokenizer grew too big; True on a swap."""
        try:
            key = self._stat_key()
        except FileNotFoundError:
            return False  # mid-rename, or deleted: keep serving the model we have
        if key == self._key and self.strings() < self.max_strings:
            return False
        self._key = key  # a damaged file is reported once, not every poll
        try:
            fresh = self._load_warm()
        except Exception as exc:  # noqa: BLE001 - keep serving whatever went wrong
            log.error("model %s changed but cannot be loaded (%s); still serving the "
                      "previous model", self.path, describe_error(exc))
            return False
        self.spam_filter = fresh  # one assignment: requests in flight keep the old one
        log.info("reloaded model %s", self.path)
        return True


class ScorerServer:
    """Serve verdicts from a ResidentModel on a Unix socket or a loopback TCP port.

    model (ResidentModel): what scores.
    address (str | tuple[str, int]): a socket path, or (host, port).
    max_bytes (int): the longest message accepted.
    max_clients (int): connections served at once.
    timeout (float): seconds a client has to send its request and read the reply.
    reload_interval (float): seconds between checks of the model file (0: never).
    allow_remote (bool): permit a TCP address that is not loopback.
    """

    def __init__(self, model: ResidentModel, address, *, max_bytes: int = MAX_MESSAGE_BYTES,
                 max_clients: int = 8, timeout: float = 10.0, reload_interval: float = 1.0,
                 allow_remote: bool = False):
        if max_bytes < 1 or max_clients < 1 or not timeout > 0 or reload_interval < 0:
            raise ServerError(f"max_bytes={max_bytes}, max_clients={max_clients}, "
                              f"timeout={timeout}, reload_interval={reload_interval}: the "
                              "first three must be > 0 and the last >= 0")
        self.model = model
        self.address = address
        self.max_bytes, self.max_clients = max_bytes, max_clients
        self.timeout, self.reload_interval = timeout, reload_interval
        self.allow_remote = allow_remote
        self.requests = 0
        self._slots = threading.BoundedSemaphore(max_clients)
        self._score_lock = threading.Lock()
        self._handlers: set[threading.Thread] = set()
        self._listener: socket.socket | None = None

    # -- listening -------------------------------------------------------------
    def bind(self) -> "ScorerServer":
        """Create the listening socket (owner-only for a Unix socket)."""
        if isinstance(self.address, tuple):
            self._listener = self._bind_tcp(*self.address)
        else:
            self._listener = self._bind_unix(Path(self.address))
        # Clients beyond max_clients wait in this queue, not in a thread. It is as long as
        # the kernel allows: a full queue makes a Unix socket's connect() fail at once
        # (EAGAIN). With the former max(16, 2 * max_clients), 200 clients connecting
        # together (bench/server_load.py, 3 rounds) saw 525 of 600 requests fail that
        # way, over to in-process scoring; with SOMAXCONN (4096 here), none.
        self._listener.listen(socket.SOMAXCONN)
        self._listener.settimeout(POLL_SECONDS)
        return self

    @property
    def bound_address(self):
        """The address actually bound (the port chosen when 0 was asked for)."""
        if isinstance(self.address, tuple):
            return self._listener.getsockname()[:2]
        return str(self.address)

    def _bind_tcp(self, host: str, port: int) -> socket.socket:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ServerError(f"cannot resolve '{host}': {exc.strerror}") from None
        family, _, _, _, sockaddr = infos[0]
        if not (ipaddress.ip_address(sockaddr[0]).is_loopback or self.allow_remote):
            raise ServerError(
                f"'{host}' ({sockaddr[0]}) is not a loopback address; the scorer has no "
                "authentication, so listen on 127.0.0.1 or a Unix socket (or pass "
                "--allow-remote if a firewall guards the port)")
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        return sock

    def _bind_unix(self, path: Path) -> socket.socket:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._check_socket_folder(path.parent)
        if path.exists() or path.is_symlink():
            self._clear_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is born 0600, not chmod'ed after
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen on {path}: {exc.strerror}") from None
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        return sock

    @staticmethod
    def _check_socket_folder(folder: Path) -> None:
        """Refuse a folder where another user could replace the socket with their own.

        The socket's 0600 only guards the socket; whoever can write to its folder can
        rename another socket over it and answer "ham" to every message. A sticky
        folder such as /tmp lets only a file's owner rename or remove it.
        """
        st = os.stat(folder)
        others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if st.st_uid not in (0, os.getuid()) or (others_write and not st.st_mode & stat.S_ISVTX):
            raise ServerError(
                f"the socket's folder {folder} (owner uid {st.st_uid}, mode "
                f"{stat.S_IMODE(st.st_mode):04o}) lets other users replace the socket; use a "
                "folder of your own (the default is ~/.local/share/textnb) or 'chmod go-w' it")

    @staticmethod
    def _clear_stale_socket(path: Path) -> None:
        """Remove a socket left by a scorer that died; refuse anything else."""
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise ServerError(f"{path} exists and is not a socket; remove it or choose "
                              "another --socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)  # nobody listens: a stale socket
            return
        except OSError as exc:
            raise ServerError(f"{path} exists and cannot be probed ({exc.strerror}); "
                              "remove it or choose another --socket") from None
        finally:
            probe.close()
        raise ServerError(f"a scorer is already listening on {path}; stop it first or "
                          "choose another --socket")

    # -- running ---------------------------------------------------------------
    def serve_forever(self, stop: threading.Event) -> None:
        """Accept and answer until ``stop`` is set; then shut down cleanly."""
        if self._listener is None:
            self.bind()
        watcher = None
        if self.reload_interval:
            watcher = threading.Thread(target=self._watch, args=(stop,), name="textnb-reload",
                                       daemon=True)
            watcher.start()
        try:
            while not stop.is_set():
                if not self._slots.acquire(timeout=POLL_SECONDS):
                    continue  # every slot busy: new clients wait in the backlog
                try:
                    conn, _ = self._listener.accept()
                except (TimeoutError, InterruptedError):
                    self._slots.release()
                    continue
                except OSError:
                    self._slots.release()
                    if stop.is_set():
                        break
                    raise
                handler = threading.Thread(target=self._handle, args=(conn,), daemon=True)
                self._handlers.add(handler)
                handler.start()
        finally:
            self._shutdown(watcher)

    def _shutdown(self, watcher: threading.Thread | None) -> None:
        self._listener.close()
        if not isinstance(self.address, tuple):
            Path(self.address).unlink(missing_ok=True)
        deadline = time.monotonic() + self.timeout
        for handler in list(self._handlers):
            handler.join(max(0.0, deadline - time.monotonic()))
        if watcher is not None:
            watcher.join(POLL_SECONDS + self.timeout)
        log.info("scorer stopped after %d requests", self.requests)

    def _watch(self, stop: threading.Event) -> None:
        while not stop.wait(self.reload_interval):
            self.model.check()

    # -- one connection ----------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                deadline = time.monotonic() + self.timeout
                reply = self._respond(conn, deadline)
                conn.settimeout(max(0.05, deadline - time.monotonic()))
                conn.sendall(reply)
        except OSError as exc:  # the client left, or was too slow
            log.info("client dropped: %s", exc.strerror or exc)
        except Exception:  # noqa: BLE001 - one bad request must not stop the server
            log.exception("unexpected error while answering a client")
        finally:
            self._handlers.discard(threading.current_thread())
            self._slots.release()

    def _respond(self, conn: socket.socket, deadline: float) -> bytes:
        buffer = _recv_until(conn, b"\n", MAX_LINE, deadline)
        line, newline, rest = buffer.partition(b"\n")
        if not newline:
            return reply_line("ERROR", f"no request line within {MAX_LINE} bytes")
        words = line.split()
        if len(words) < 2 or words[0] != PROTOCOL:
            return reply_line("ERROR", f"expected '{PROTOCOL.decode()} SCORE <length>' or "
                                       f"'{PROTOCOL.decode()} PING'")
        if words[1] == b"PING":
            n = self.model.spam_filter.n_learned
            return reply_line("PONG", f"spam={n.get('spam', 0)}", f"ham={n.get('ham', 0)}",
                              f"loads={self.model.loads}", f"requests={self.requests}",
                              f"strings={self.model.strings()}")
        if words[1] != b"SCORE" or len(words) not in (3, 4) or not words[2].isdigit():
            return reply_line("ERROR", f"bad request {line[:60]!r}")
        length = int(words[2])
        if length > self.max_bytes:
            return reply_line("ERROR", f"message of {length} bytes exceeds the scorer's "
                                       f"limit of {self.max_bytes} (--max-bytes)")
        try:
            cost_ratio = float(words[3]) if len(words) == 4 else None
        except ValueError:
            cost_ratio = float("nan")  # refused below, by name
        if cost_ratio is not None and not 0 < cost_ratio < float("inf"):
            return reply_line("ERROR", f"cost ratio {words[3][:40]!r} must be a number > 0 "
                                       "and finite")
        raw = rest[:length]
        if length > len(raw):
            raw += _recv_exactly(conn, length - len(raw), deadline)
        spam_filter = self.model.spam_filter  # this request's model, whatever reloads
        with self._score_lock:
            try:
                v = score_with(spam_filter, raw, cost_ratio)
            except Exception as exc:  # noqa: BLE001 - reported to the client, which falls back
                log.exception("scoring failed")
                return reply_line("ERROR", describe_error(exc))
            self.requests += 1
        return reply_line("OK", v.label, v.log_odds, v.p_spam, v.threshold)


def _recv(conn: socket.socket, size: int, deadline: float) -> bytes:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("request not complete within the timeout")
    conn.settimeout(remaining)
    return conn.recv(size)


def _recv_until(conn: socket.socket, marker: bytes, limit: int, deadline: float) -> bytes:
    """Bytes up to and past ``marker`` (what one recv gave), or at most ``limit`` bytes."""
    data = b""
    while marker not in data and len(data) <= limit:
        chunk = _recv(conn, 65536, deadline)
        if not chunk:
            break
        data += chunk
    return data


def _recv_exactly(conn: socket.socket, size: int, deadline: float) -> bytes:
    chunks, missing = [], size
    while missing > 0:
        chunk = _recv(conn, min(missing, 1 << 20), deadline)
        if not chunk:
            raise ConnectionError(f"client closed the connection {missing} bytes short")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
