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
from .health import training_health
from .lazy_import import import_now
from .learning import Journal, Record, apply, journal_path, snapshot_bytes
from .lock import ModelLockedError, model_lock
from .store import atomic_write

log = logging.getLogger("textnb.server")

# Scoring's SciPy modules, imported before any handler thread scores (lazy_import).
import_now("scipy.sparse", "scipy.special")

# How often the accept loop and the reload watcher wake up to look at ``stop``: the
# longest a SIGTERM waits before the server begins to shut down.
POLL_SECONDS = 0.2
# Scored once on every (re)load, so that spaCy's tokenizer and the vocabulary's first
# lookups are built before the model serves a request, not during one.
WARM_UP = b"Subject: warm-up\nFrom: textnb <textnb@localhost>\n\nwarm up http://example.com/ $10\n"
# spaCy's vocabulary keeps every distinct string it has tokenised, and mail brings new
# ones in every message: scoring the 6,047 SpamAssassin messages adds 114,000 strings
# and 115 MB; 3,000 messages of 200 random words add 600,000 strings and 370 MB. So
# past this many strings the scorer starts afresh from the model file (a reload).
MAX_STRINGS = 500_000
# The longest an acknowledged update waits before the model file is rewritten (textnb.learning):
# a SpamAssassin-sized model takes 0.6 s to write, so 1 s keeps the writer busy at most
# ~40% of the time however fast updates come.
FLUSH_SECONDS = 1.0
# How long the final write at shutdown waits for a `textnb retrain` holding the model's lock.
LOCK_WAIT = 30.0
SINGLE_MODEL_USER = ("this scorer serves one model; a user name needs 'textnb serve --models "
                     "DIR' (a model per user)")


class ServerError(TextnbError):
    """The scorer cannot start: the address is taken, not allowed, or not a socket."""


class ResidentModel:
    """The loaded model, replaced when its file changes.

    path (Path): the model file.
    load (Callable[[Path], SpamFilter]): the loader; default ``textnb.store.load``.
    max_strings (int): reload, to free memory, once the tokenizer holds this many strings.
    """

    def __init__(self, path, load=None, max_strings: int = MAX_STRINGS, *, lock=None,
                 flush_seconds: float = FLUSH_SECONDS, new_config=None, tokenizer_of=None):
        if load is None:
            from .store import load
        self.path = Path(path)
        self._load = load
        self.max_strings = max_strings
        self.loads = 0
        # Scoring and learning on this model hold this lock (per-user models share one).
        self.lock = lock if lock is not None else threading.Lock()
        self.flush_seconds = flush_seconds
        self.journal = Journal(journal_path(self.path))
        self.learned = 0  # learn and forget requests acknowledged
        self.writes = 0  # model files written
        self._flush_due: float | None = None  # when the oldest unwritten update must be written
        self._tokenizer_of = tokenizer_of  # a model whose tokenizer this one may share
        try:
            self._key = self._stat_key()  # before the load: a change during it is seen later
        except FileNotFoundError:
            self._key = None  # the loader's error names the missing file and the fix
        if self._key is None and new_config is not None:
            from .pipeline import SpamFilter

            self.spam_filter = SpamFilter(new_config)  # a user's first learn creates it
            self._share_tokenizer(self.spam_filter)
        else:
            self.spam_filter = self._load_warm()
        self._replay(self.spam_filter)  # updates a killed scorer acknowledged

    def _stat_key(self):
        st = os.stat(self.path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _share_tokenizer(self, spam_filter) -> bool:
        other = self._tokenizer_of
        if other is None or other.spam_filter.config.tokenizer != spam_filter.config.tokenizer:
            return False
        spam_filter._tokenizer = other.spam_filter.tokenizer  # one spaCy for every user
        return True

    def _load_warm(self):
        spam_filter = self._load(self.path)
        if not self._share_tokenizer(spam_filter):
            score_with(spam_filter, WARM_UP)
        self.loads += 1
        return spam_filter

    def _replay(self, spam_filter) -> int:
        """Apply the journal's records to a freshly loaded filter; how many there were."""
        records = self.journal.read()
        for record, _ in records:
            try:
                apply(spam_filter, record)
            except Exception as exc:  # noqa: BLE001 - it failed the same way when it was sent
                log.error("journal %s: a %s record cannot be applied (%s); skipped",
                          self.journal.path, record.kind, describe_error(exc))
        if records:
            self._flush_due = time.monotonic()  # write them into the file soon
            log.info("applied %d journal records to %s", len(records), self.path)
        return len(records)

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
        with self.lock:  # learns acknowledged meanwhile are in the journal: none is lost
            self._replay(fresh)
            self.spam_filter = fresh  # one assignment: requests in flight keep the old one
        log.info("reloaded model %s", self.path)
        return True

    # -- learning ----------------------------------------------------------------
    def update(self, kind: str, raw: bytes, label: str | None = None) -> str:
        """Learn (kind 'LEARN', label 'spam'/'ham') or forget ('FORGET') one message.

        Journaled (fsync'd), then applied in memory; the caller may acknowledge once
        this returns (textnb.learning). RETURNS learning.apply's outcome.
        """
        record = Record(kind, label, bytes(raw))
        with self.lock:
            self.journal.append(record)
            outcome = apply(self.spam_filter, record)
            self.learned += 1
            if self._flush_due is None:
                self._flush_due = time.monotonic() + self.flush_seconds
        return outcome

    @property
    def unwritten(self) -> bool:
        return self._flush_due is not None

    def flush(self, force: bool = False) -> bool:
        """Write the model file if updates are due (or any, with ``force``); True if written.

        Under the model's file lock, as ``textnb retrain`` takes it: a retrain that
        holds it delays the write to a later round (or, with ``force``, waits up to
        ``LOCK_WAIT`` seconds). A retrain that wrote since is loaded first, with the
        journal replayed on top.
        """
        due = self._flush_due
        if due is None or (not force and time.monotonic() < due):
            return False
        try:
            with model_lock(self.path, timeout=LOCK_WAIT if force else 0.0):
                self.check()
                with self.lock:
                    produce = snapshot_bytes(self.spam_filter)
                    offset = self.journal.size()
                atomic_write(self.path, produce())
                self._key = self._stat_key()
                self.journal.drop_through(offset)
                with self.lock:
                    if self.journal.size() == 0:
                        self._flush_due = None
                    elif self._flush_due == due:  # records came in during the write
                        self._flush_due = time.monotonic() + self.flush_seconds
        except ModelLockedError:
            log.info("model %s is being updated by another process; writing later", self.path)
            return False
        except (OSError, TextnbError) as exc:
            log.error("cannot write model %s (%s); its updates stay in the journal %s",
                      self.path, describe_error(exc), self.journal.path)
            self._flush_due = time.monotonic() + max(self.flush_seconds, 5.0)
            return False
        self.writes += 1
        return True

    # -- the interface the server uses (textnb.users.ModelSet has the same) -------------
    def for_scoring(self, user: str | None):
        if user is not None:
            raise TextnbError(SINGLE_MODEL_USER)
        return self, "model"

    def for_learning(self, user: str | None):
        if user is not None:
            raise TextnbError(SINGLE_MODEL_USER)
        return self

    def loaded(self) -> list["ResidentModel"]:
        return [self]


class ScorerServer:
    """Serve verdicts from a ResidentModel on a Unix socket or a loopback TCP port.

    model (ResidentModel): what scores.
    address (str | tuple[str, int]): a socket path, or (host, port).
    max_bytes (int): the longest message accepted.
    max_clients (int): connections served at once.
    timeout (float): seconds a client has to send its request and read the reply.
    reload_interval (float): seconds between checks of the model file (0: never).
    allow_remote (bool): permit a TCP address that is not loopback.
    socket_mode (int): the Unix socket's mode (0600: only this OS user may connect).
    user_from_peer (bool): the user is the connecting process's login name
        (SO_PEERCRED), and a request naming another user is refused (textnb.users).
    telemetry (Telemetry | None): counts each reply and its latency (textnb.telemetry).
    """

    def __init__(self, model: ResidentModel, address, *, max_bytes: int = MAX_MESSAGE_BYTES,
                 max_clients: int = 8, timeout: float = 10.0, reload_interval: float = 1.0,
                 allow_remote: bool = False, socket_mode: int = 0o600,
                 user_from_peer: bool = False, telemetry=None):
        if max_bytes < 1 or max_clients < 1 or not timeout > 0 or reload_interval < 0:
            raise ServerError(f"max_bytes={max_bytes}, max_clients={max_clients}, "
                              f"timeout={timeout}, reload_interval={reload_interval}: the "
                              "first three must be > 0 and the last >= 0")
        self.model = model
        self.address = address
        self.max_bytes, self.max_clients = max_bytes, max_clients
        self.timeout, self.reload_interval = timeout, reload_interval
        self.allow_remote = allow_remote
        self.socket_mode, self.user_from_peer = socket_mode, user_from_peer
        if user_from_peer and isinstance(address, tuple):
            raise ServerError("--user-from-peer needs a Unix socket: over TCP the scorer "
                              "cannot see which user connects")
        self.requests = 0
        self.telemetry = telemetry
        self._slots = threading.BoundedSemaphore(max_clients)
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
        os.chmod(path, self.socket_mode)
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
        for model in self.model.loaded():  # the updates not yet in a model file
            if model.unwritten:
                model.flush(force=True)
            model.journal.close()
        log.info("scorer stopped after %d requests", self.requests)

    def _watch(self, stop: threading.Event) -> None:
        """Reload changed model files (every reload_interval) and write due updates."""
        next_check = time.monotonic() + self.reload_interval
        while not stop.wait(min(POLL_SECONDS, self.reload_interval or POLL_SECONDS)):
            models = self.model.loaded()
            if self.reload_interval and time.monotonic() >= next_check:
                next_check = time.monotonic() + self.reload_interval
                for model in models:
                    model.check()
            for model in models:
                model.flush()

    # -- one connection ----------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                started = time.monotonic()
                deadline = started + self.timeout
                reply = self._respond(conn, deadline)
                conn.settimeout(max(0.05, deadline - time.monotonic()))
                conn.sendall(reply)
                if self.telemetry is not None:
                    self.telemetry.observe_reply(reply, time.monotonic() - started)
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
        user = None
        if len(words) > 2 and words[-1].startswith(b"user="):
            user = words.pop()[len(b"user="):].decode("utf-8", "replace")
        if len(words) < 2 or words[0] != PROTOCOL:
            return reply_line("ERROR", f"expected '{PROTOCOL.decode()} SCORE <length>' or "
                                       f"'{PROTOCOL.decode()} PING'")
        try:
            if self.user_from_peer:
                user = _peer_user(conn, user)
            if words[1] == b"PING":
                return self._pong(user)
            if words[1] == b"SCORE" and len(words) in (3, 4) and words[2].isdigit():
                return self._score(conn, words, rest, user, deadline)
            if (words[1] == b"LEARN" and len(words) == 4 and words[2] in (b"spam", b"ham")
                    and words[3].isdigit()) or (words[1] == b"FORGET" and len(words) == 3
                                                and words[2].isdigit()):
                return self._learn(conn, words, rest, user, deadline)
        except TextnbError as exc:  # a bad user name, one model and a user, a model that will not load
            return reply_line("ERROR", describe_error(exc))
        return reply_line("ERROR", f"bad request {line[:60]!r}")

    def _pong(self, user: str | None) -> bytes:
        model, source = self.model.for_scoring(user)
        n = model.spam_filter.n_learned
        fields = [f"spam={n.get('spam', 0)}", f"ham={n.get('ham', 0)}",
                  f"loads={model.loads}", f"requests={self.requests}",
                  f"strings={model.strings()}"]
        if user is not None:
            fields.append(f"model={source}")
        health = training_health(n)
        fields.append(f"health={'ok' if health.ok else 'low'}")
        return reply_line("PONG", *fields)

    def _message(self, conn, length: int, rest: bytes, deadline: float) -> bytes:
        raw = rest[:length]
        if length > len(raw):
            raw += _recv_exactly(conn, length - len(raw), deadline)
        return raw

    def _too_long(self, length: int) -> bytes | None:
        if length > self.max_bytes:
            return reply_line("ERROR", f"message of {length} bytes exceeds the scorer's "
                                       f"limit of {self.max_bytes} (--max-bytes)")
        return None

    def _score(self, conn, words, rest, user, deadline) -> bytes:
        length = int(words[2])
        if (refusal := self._too_long(length)) is not None:
            return refusal
        try:
            cost_ratio = float(words[3]) if len(words) == 4 else None
        except ValueError:
            cost_ratio = float("nan")  # refused below, by name
        if cost_ratio is not None and not 0 < cost_ratio < float("inf"):
            return reply_line("ERROR", f"cost ratio {words[3][:40]!r} must be a number > 0 "
                                       "and finite")
        model, _ = self.model.for_scoring(user)
        raw = self._message(conn, length, rest, deadline)
        spam_filter = model.spam_filter  # this request's model, whatever reloads
        with model.lock:
            try:
                v = score_with(spam_filter, raw, cost_ratio)
            except Exception as exc:  # noqa: BLE001 - reported to the client, which falls back
                log.exception("scoring failed")
                return reply_line("ERROR", describe_error(exc))
            self.requests += 1
        return reply_line("OK", v.label, v.log_odds, v.p_spam, v.threshold)

    def _learn(self, conn, words, rest, user, deadline) -> bytes:
        kind = words[1].decode()
        label = words[2].decode() if kind == "LEARN" else None
        length = int(words[-1])
        if (refusal := self._too_long(length)) is not None:
            return refusal
        raw = self._message(conn, length, rest, deadline)
        model = self.model.for_learning(user)
        try:
            outcome = model.update(kind, raw, label)
        except Exception as exc:  # noqa: BLE001 - the client is told: not learned
            log.exception("%s failed", kind.lower())
            return reply_line("ERROR", f"not {'learned' if label else 'forgotten'}: "
                                       + describe_error(exc))
        if label is not None:
            return reply_line("LEARNED", label, outcome)
        return reply_line("FORGOTTEN", outcome)


def _peer_user(conn: socket.socket, asked: str | None) -> str:
    """The login name of the process at the other end; refuse a request naming another."""
    import pwd
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        raise TextnbError(f"connecting uid {uid} has no login name; it cannot have a "
                          "model") from None
    if asked is not None and asked != name:
        raise TextnbError(f"user {asked!r} refused: this connection is from user {name!r} "
                          "(--user-from-peer)")
    return name


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
