"""The resident scorer: the model and tokenizer loaded once, verdicts over a socket.

Loading a model and building spaCy's tokenizer costs most of a second; scoring a
message costs milliseconds. ``textnb serve`` pays the first cost once and answers
:mod:`textnb.delivery.client` requests (the protocol is described there) for as long as it runs.

- **Where it listens.** A Unix socket by default, created owner-only (mode 0600), so
  only its user can ask, in a folder no other user can write to (or a sticky one,
  as /tmp), so none can swap in a socket of their own; or TCP on a loopback
  address. A non-loopback address is refused unless asked for explicitly: the
  scorer does not authenticate its clients. With ``key`` (``--key-file``) each reply
  to a request with a nonce carries an HMAC that proves this scorer answered, so
  clients believe no other program that takes its TCP port (textnb.delivery.client).
- **Who may teach.** Per-user models need to know who connects: a Unix socket with
  ``user_from_peer``, or a socket only the scorer's user (and group) can open. Over
  TCP, or a socket every user can open, they are refused at start, and a single
  model learns nothing there (LEARN and FORGET get ERROR), unless
  ``allow_any_user_to_teach`` says every local user may teach every model.
- **Bounds.** Connections are read by :mod:`textnb.delivery.request_reader`: a request must
  be complete within ``timeout`` seconds of its accept, however slowly it trickles
  in, and only complete requests reach the ``max_clients`` worker threads, so slow
  clients hold no worker. A message longer than ``max_bytes`` is refused (the client
  then scores in process); a request that is not the protocol, a length that is not
  a number, or a cost ratio that is not a finite number > 0 gets an ERROR reply.
  Scoring runs one message at a time under a lock (it holds the GIL anyway, and the
  tokenizer's caches are not meant for threads). Out of descriptors or threads, the
  scorer sheds connections and keeps serving (docs/security.md has every limit).
- **Reloads.** A watcher thread stats the model file every ``reload_interval``
  seconds; when its inode, size or mtime changes (``textnb train`` renames a new
  file into place) the new model is loaded and warmed up beside the old one and
  then swapped in with one assignment: requests in flight finish on the old model,
  none waits for the load. A damaged new file is logged and the old model kept.
  The same reload renews the tokenizer when spaCy's vocabulary has grown past
  ``MAX_STRINGS`` (it keeps every string it has seen).
- **Learning.** Each update (``textnb-client --learn``, the review page) is, in this
  order, appended to the model's journal and fsync'd (``textnb.modelfile.journal``),
  applied in memory through the model's lifecycle (``Lifecycle.update``, as
  ``textnb retrain`` and ``textnb forget`` apply it: new messages learned, repeats
  skipped, relabelled ones moved, forgotten ones removed), then acknowledged. So an
  acknowledged update is durable and in every later verdict. The model file is
  rewritten at most ``flush_seconds`` after the first update it lacks, and at
  shutdown, as a file holding the journal through the model's last record; ``kill
  -9`` at any moment leaves the old file or the new one and a journal numbering
  exactly the acknowledged updates the file may lack (plus at most one unanswered
  update per client learning at that moment). A scorer that starts loads the file and
  the journal's records past it.
- **Shutdown.** When ``stop`` is set (the CLI sets it on SIGTERM or SIGINT) the
  server stops accepting, reads the requests begun and lets those in hand finish
  (each up to its deadline), removes its socket file, writes every model with
  updates not yet in its file, and returns; the write happens whatever failed before.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import os
import socket
import stat
import threading
import time
import types
from pathlib import Path

from ..errors import TextnbError
from ..features.lazy_scipy import import_now
from ..modelfile.lifecycle import Lifecycle
from ..modelfile.lock import ModelLockedError, model_lock
from ..modelfile.journal import Record, apply_records, pending
from ..modelfile.store import journal as model_journal
from ..modelfile.store import write_holding
from ..models.health import training_health
from ..models.ledger import message_digest
from .client import MAX_MESSAGE_BYTES, reply_line, reply_mac
from .request_reader import POLL_SECONDS, Request, RequestReader, Throttle, WorkerPool
from .user_names import user_key
from .verdict_headers import describe_error, score_with

log = logging.getLogger("textnb.delivery.server")

# Scoring's SciPy modules, imported before any handler thread scores (lazy_import).
import_now("scipy.sparse", "scipy.special")

# Connections open at once (being read or answered); more wait in the listen backlog.
# Each holds a descriptor, so never more than half the process's descriptor limit: the
# other half is for model files, journals, the metrics port and a user's model loading.
MAX_CONNECTIONS = 512
# A learn is applied only if this much of its --timeout is left (at most a quarter of
# it): a journal append and an apply take a small part of that margin
# (docs/learning.md#the-scorers-journal), and a client waits --timeout for the
# answer, so it is never told "not learned" for an update that is then made.
LEARN_MARGIN = 1.0
# Scored once on every (re)load, so that spaCy's tokenizer and the vocabulary's first
# lookups are built before the model serves a request, not during one.
WARM_UP = b"Subject: warm-up\nFrom: textnb <textnb@localhost>\n\nwarm up http://example.com/ $10\n"
# spaCy's vocabulary keeps every distinct string it has tokenised, and mail brings new
# ones in every message: scoring the 6,047 SpamAssassin messages adds 114,000 strings
# and 115 MB; 3,000 messages of 200 random words add 600,000 strings and 370 MB. So
# past this many strings the scorer starts afresh from the model file (a reload).
MAX_STRINGS = 500_000
# The longest an acknowledged update waits before the model file is rewritten
# (textnb.modelfile.journal): a shorter wait keeps the file closer to the journal
# but rewrites it more often; at this one the writer is busy at most about 40 % of the
# time however fast updates come (docs/learning.md#the-scorers-journal).
FLUSH_SECONDS = 1.0
# How long the final write at shutdown waits for a `textnb retrain` holding the model's lock.
LOCK_WAIT = 30.0
# How often the scorer repeats, while another process keeps the model's lock, that its
# updates wait in the journal (the first time is said at once).
LOCKED_WARNING_SECONDS = 60.0
SINGLE_MODEL_USER = ("this scorer serves one model; a user name needs 'textnb serve --models "
                     "DIR' (a model per user)")


def snapshot_bytes(spam_filter, journal_seq: int):
    """A callable that returns the model file's bytes as the filter is *now*, a file
    holding the journal through record ``journal_seq``.

    Copies what ``store.dumps`` reads (counts, vocabulary, ledger: a few milliseconds
    for a SpamAssassin-sized model) so that the slow compression can run outside the
    lock while learning goes on.
    """
    from ..modelfile.store import dumps

    model = spam_filter.model
    ledger = spam_filter.ledger.copy()  # entries and column history: learning goes on
    frozen = types.SimpleNamespace(
        model=types.SimpleNamespace(class_count_=model.class_count_.copy(),
                                    feature_count_=model.feature_count_.copy()),
        vocabulary=types.SimpleNamespace(tokens_=spam_filter.vocabulary.tokens_.copy()),
        doc_freq_=spam_filter.doc_freq_.copy(), ledger=ledger,
        numeric=copy.deepcopy(getattr(spam_filter, "numeric", None)),
        config=spam_filter.config, n_learned=dict(spam_filter.n_learned),
        threshold=spam_filter.threshold, calibration=copy.deepcopy(spam_filter.calibration))
    return lambda: dumps(frozen, journal_seq)


class ServerError(TextnbError):
    """The scorer cannot start: the address is taken, not allowed, or not a socket."""


class ResidentModel:
    """The loaded model, replaced when its file changes.

    path (Path): the model file.
    load (Callable[[Path], tuple]): the loader, returning the filter and what loading
        found (``JournalState``); default ``textnb.modelfile.store.load_at``.
    max_strings (int): reload, to free memory, once the tokenizer holds this many strings.
    """

    def __init__(self, path, load=None, max_strings: int = MAX_STRINGS, *, lock=None,
                 flush_seconds: float = FLUSH_SECONDS, new_config=None, tokenizer_of=None):
        if load is None:
            from ..modelfile.store import load_at as load
        self.path = Path(path)
        self._load = load
        self.max_strings = max_strings
        self.loads = 0
        # Scoring and learning on this model hold this lock (per-user models share one).
        self.lock = lock if lock is not None else threading.Lock()
        self.flush_seconds = flush_seconds
        self.journal = model_journal(self.path)
        self.seq = 0  # the last journal record the model in memory holds
        self._stale = False  # it lacks records a file written by another process holds
        self.learned = 0  # learn and forget requests acknowledged
        self.writes = 0  # model files written
        self._flush_due: float | None = None  # when the oldest unwritten update must be written
        self._locked_since: float | None = None  # a write found the lock held, since then
        self._locked_said = 0.0
        self._tokenizer_of = tokenizer_of  # a model whose tokenizer this one may share
        try:
            self._key = self._stat_key()  # before the load: a change during it is seen later
        except FileNotFoundError:
            self._key = None  # the loader's error names the missing file and the fix
        self._loaded_key = self._key  # the file the model in memory was loaded from
        if self._key is None and new_config is not None:
            from ..spamfilter import SpamFilter

            self.spam_filter = SpamFilter(new_config)  # a user's first learn creates it
            self._share_tokenizer(self.spam_filter)  # (ModelSet applies its journal)
        else:
            self.spam_filter, state = self._load_warm()
            self.seq = state.seq
            if state.records:  # updates a killed scorer acknowledged: into the file soon
                self._flush_due = time.monotonic()

    def _stat_key(self):
        st = os.stat(self.path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _file_key(self):
        try:
            return self._stat_key()
        except FileNotFoundError:
            return None  # a user's model before its first write

    def _share_tokenizer(self, spam_filter) -> bool:
        other = self._tokenizer_of
        if other is None or other.spam_filter.config.tokenizer != spam_filter.config.tokenizer:
            return False
        spam_filter._tokenizer = other.spam_filter.tokenizer  # one spaCy for every user
        return True

    def _load_warm(self):
        spam_filter, state = self._load(self.path)
        if not self._share_tokenizer(spam_filter):
            score_with(spam_filter, WARM_UP)
        self.loads += 1
        return spam_filter, state

    def catch_up(self, records=None) -> int:
        """Apply to the model in memory (call it holding ``self.lock``) the journal's
        records past the last one it holds: another process's, or this one's appended
        while a reload read the file (``records``: those, when the caller has them).
        RETURNS how many. When they do not follow on from it (a file written meanwhile
        holds the ones between), the model is marked stale: reloaded before it is
        written (``flush``) and at the watcher's next look."""
        if records is None:
            records = pending(self.journal.read(), self.seq)
        if not records:
            return 0
        if records[0].seq != self.seq + 1:
            self._stale = True
            return 0
        try:
            applied = apply_records(self.spam_filter, records, self.seq, str(self.journal.path))
        except Exception:
            self._stale = True  # part applied, perhaps: load it whole before writing it
            raise
        self.seq = records[-1].seq
        if self._flush_due is None:
            self._flush_due = time.monotonic() + self.flush_seconds
        log.info("applied %d journal records to %s", applied, self.path)
        return applied

    def _reload(self, key) -> None:
        """Load the file (whose stat was ``key`` just before) and its journal, and swap
        the result in, with the records appended meanwhile applied."""
        fresh, state = self._load_warm()
        with self.lock:  # learns acknowledged meanwhile are in the journal: none is lost
            old = self.spam_filter, self.seq, self._loaded_key
            self.spam_filter, self.seq, self._stale = fresh, state.seq, False
            self._loaded_key = key
            try:
                self.catch_up()
            except Exception:
                self.spam_filter, self.seq, self._loaded_key = old
                raise

    def strings(self) -> int:
        """How many strings the tokenizer's spaCy vocabulary holds (its memory)."""
        return len(self.spam_filter.tokenizer.spacy.vocab.strings)

    def check(self) -> bool:
        """Reload if the file changed or the tokenizer grew too big; True on a swap."""
        try:
            key = self._stat_key()
        except FileNotFoundError:
            return False  # mid-rename, or deleted: keep serving the model we have
        if key == self._key and not self._stale and self.strings() < self.max_strings:
            return False
        self._key = key  # a damaged file is reported once, not every poll
        try:
            self._reload(key)
        except Exception as exc:  # noqa: BLE001 - keep serving whatever went wrong
            log.error("model %s changed but cannot be loaded (%s); still serving the "
                      "previous model", self.path, describe_error(exc))
            return False
        log.info("reloaded model %s", self.path)
        return True

    # -- learning ----------------------------------------------------------------
    def update(self, kind: str, raw: bytes, label: str | None = None,
               apply_by: float | None = None) -> str:
        """Learn (kind 'LEARN', label 'spam'/'ham') or forget ('FORGET') one message.

        Journaled (fsync'd), then applied in memory; the caller may acknowledge once
        this returns (the module docstring's Learning). RETURNS Lifecycle.update's outcome.
        apply_by (float | None): a time.monotonic() past which the update is not made
        (TimeoutError), checked once the model's lock is held: the client would have
        stopped waiting for the answer.
        """
        record = Record(kind, label, bytes(raw))
        with self.lock:
            if apply_by is not None and time.monotonic() > apply_by:
                raise TimeoutError("it waited too long for the model (--timeout); send it "
                                   "again")
            seq = self.journal.append(record, self.seq, catch_up=self.catch_up)
            outcome = Lifecycle(self.spam_filter).update(kind, record.payload, label)
            self.seq = max(self.seq, seq)
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
        journal's later records on top. The file records the last journal record the
        model holds; the journal then drops the records up to it.
        """
        due = self._flush_due
        if due is None or (not force and time.monotonic() < due):
            return False
        try:
            with model_lock(self.path, timeout=LOCK_WAIT if force else 0.0):
                key = self._file_key()
                if key != self._loaded_key or self._stale:  # another process wrote it
                    self._reload(key)
                with self.lock:
                    self.catch_up()
                    if self._stale:
                        raise TextnbError("the model file changed and cannot be loaded")
                    produce, seq = snapshot_bytes(self.spam_filter, self.seq), self.seq
                write_holding(self.path, produce(), seq)
                with self.lock:
                    self._key = self._loaded_key = self._stat_key()
                    if self.seq == seq:
                        self._flush_due = None
                    elif self._flush_due == due:  # records came in during the write
                        self._flush_due = time.monotonic() + self.flush_seconds
        except ModelLockedError:
            # A retrain holds the lock for its whole run: try again a flush interval on
            # (not at every poll), and say so once per wait, and again while it lasts.
            now = time.monotonic()
            if self._locked_since is None:
                self._locked_since = self._locked_said = now
                log.info("model %s is being updated by another process; writing later",
                         self.path)
            elif now - self._locked_said >= LOCKED_WARNING_SECONDS:
                self._locked_said = now
                log.warning("model %s: another process has held its lock for %.0f s, so its "
                            "updates wait in the journal %s (%d bytes)", self.path,
                            now - self._locked_since, self.journal.path, self.journal.size())
            self._flush_due = now + max(self.flush_seconds, 1.0)
            return False
        except (OSError, TextnbError) as exc:
            log.error("cannot write model %s (%s); its updates stay in the journal %s",
                      self.path, describe_error(exc), self.journal.path)
            self._flush_due = time.monotonic() + max(self.flush_seconds, 5.0)
            return False
        self._locked_since = None
        self.writes += 1
        return True

    # -- the interface the server uses (textnb.delivery.users.ModelSet has the same) -------------
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

    model (ResidentModel | ModelSet): what scores (a ModelSet: a model per user).
    address (str | tuple[str, int]): a socket path, or (host, port).
    max_bytes (int): the longest message accepted.
    max_clients (int): requests answered at once (worker threads); connections being
        read do not count.
    timeout (float): seconds from a connection's accept to its last request byte.
    reload_interval (float): seconds between checks of the model file (0: never).
    allow_remote (bool): permit a TCP address that is not loopback.
    socket_mode (int): the Unix socket's mode (0600: only this OS user may connect).
    user_from_peer (bool): the user is the connecting process's login name
        (SO_PEERCRED), and a request naming another user is refused (textnb.delivery.users).
    allow_any_user_to_teach (bool): serve per-user models, and learn, where any local
        user can connect and name any user (TCP, or a socket mode with o+w).
    max_connections (int | None): connections open at once; None: MAX_CONNECTIONS, at
        most half the descriptor limit.
    max_buffered (int | None): request bytes held at once; None: max_clients * max_bytes.
    telemetry (Telemetry | None): counts each reply and its latency (textnb.delivery.telemetry).
    recorder (VerdictRecorder | None): is given every verdict, after the model's lock is
        released (textnb.review.recorder: never blocks, never fails the reply).
    key (bytes | None): the shared key (``--key-file``, textnb.delivery.client.read_key):
        a reply to a request with a nonce carries its MAC, which proves to the client
        that this scorer, not whoever else holds the address, answered.
    """

    def __init__(self, model: ResidentModel, address, *, max_bytes: int = MAX_MESSAGE_BYTES,
                 max_clients: int = 8, timeout: float = 10.0, reload_interval: float = 1.0,
                 allow_remote: bool = False, socket_mode: int = 0o600,
                 user_from_peer: bool = False, allow_any_user_to_teach: bool = False,
                 max_connections: int | None = None, max_buffered: int | None = None,
                 telemetry=None, recorder=None, key: bytes | None = None):
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
        check_who_may_teach(hasattr(model, "shared"), address, socket_mode, user_from_peer,
                            allow_any_user_to_teach)
        self.learning_refused = (_anyone_connects(address, socket_mode) and not user_from_peer
                                 and not allow_any_user_to_teach)
        self.max_connections = max_connections or _connection_limit()
        self.max_buffered = max_buffered or max_clients * max_bytes
        self.requests = 0
        self.telemetry = telemetry
        self.recorder = recorder
        self.key = key
        self.reader: RequestReader | None = None
        self.pool = WorkerPool(max_clients, self._answer)
        self._listener: socket.socket | None = None
        self._throttle = Throttle()

    # -- listening -------------------------------------------------------------
    def bind(self) -> "ScorerServer":
        """Create the listening socket (owner-only for a Unix socket)."""
        bound_at = None
        if isinstance(self.address, tuple):
            self._listener = self._bind_tcp(*self.address)
        else:
            self._listener, bound_at = self._bind_unix(Path(self.address))
        # Clients beyond max_connections wait in this queue. It is as long as the
        # kernel allows: a full queue makes a Unix socket's connect() fail at once
        # (EAGAIN). With the former max(16, 2 * max_clients), 200 clients connecting
        # together (bench/server_load.py, 3 rounds) saw 525 of 600 requests fail that
        # way, over to in-process scoring; with SOMAXCONN (4096 here), none.
        try:
            self._listener.listen(socket.SOMAXCONN)
        except OSError:
            if bound_at is not None:
                bound_at.unlink(missing_ok=True)
            raise
        if bound_at is not None and bound_at != Path(self.address):
            # Bound under a name of its own and renamed into place once listening: a
            # client (or a script waiting for the file) never finds a socket that
            # refuses connections because listen() has not run yet.
            os.replace(bound_at, self.address)
        self.reader = RequestReader(
            self._listener, self._dispatch, max_bytes=self.max_bytes, timeout=self.timeout,
            max_connections=self.max_connections, max_buffered=self.max_buffered,
            observe=self.telemetry.observe_reply if self.telemetry is not None else None)
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
                f"'{host}' ({sockaddr[0]}) is not a loopback address; the scorer does not "
                "authenticate its clients, so listen on 127.0.0.1 or a Unix socket (or pass "
                "--allow-remote if a firewall guards the port)")
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        return sock

    def _bind_unix(self, path: Path) -> tuple[socket.socket, Path]:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._check_socket_folder(path.parent)
        if path.exists() or path.is_symlink():
            self._clear_stale_socket(path)
        # A name of the final name's length, so that it fits wherever that one does
        # (a Unix socket's path is limited to about 108 bytes).
        aside = path.with_name(("." + os.urandom(8).hex())[:len(path.name)])
        if len(path.name) < 6 or aside.exists():
            aside = path  # too short a name to hide: bound in place
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is born 0600, not chmod'ed after
        try:
            sock.bind(str(aside))
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen on {path}: {exc.strerror}") from None
        finally:
            os.umask(old_umask)
        os.chmod(aside, self.socket_mode)
        return sock, aside

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
        try:
            watcher = threading.Thread(target=self._watch, args=(stop,), name="textnb-reload",
                                       daemon=True)
            try:
                watcher.start()
            except RuntimeError as exc:  # at the process's thread limit from the start
                watcher = None
                raise ServerError(f"cannot start the reload thread ({exc}): the process is "
                                  "at its thread limit (systemd's TasksMax, ulimit -u)") from None
            if isinstance(self.address, tuple) and self.key is None:
                log.warning("no --key-file: clients cannot tell this scorer from another "
                            "program on TCP port %s, so they ask it only with "
                            "--insecure-tcp (docs/security.md)", self.bound_address[1])
            if self.learning_refused:
                log.warning("learning is off: any local user can connect to %s; LEARN and "
                            "FORGET get ERROR (serve on a Unix socket of mode 0600, or pass "
                            "--allow-any-user-to-teach)", _where(self.address, self.socket_mode))
            self.reader.run(stop)
        finally:
            stop.set()  # whatever ended the loop: the reload thread stops too
            self._shutdown(watcher)

    def _shutdown(self, watcher: threading.Thread | None) -> None:
        """Stop listening, let the requests in hand finish, and always write the updates
        not yet in a model file: each step's failure is logged, none skips the write."""
        _attempt("close the socket", self._close_listener)
        _attempt("finish the requests in hand", lambda: self.pool.stop(self.timeout))
        if watcher is not None:
            _attempt("stop the reload thread", lambda: watcher.join(POLL_SECONDS + self.timeout))
        for model in self.model.loaded():  # after the requests: a learn may have added one
            _attempt(f"write {model.path}", lambda: model.unwritten and model.flush(force=True))
        log.info("scorer stopped after %d requests", self.requests)

    def _close_listener(self) -> None:
        self._listener.close()
        if not isinstance(self.address, tuple):
            Path(self.address).unlink(missing_ok=True)

    def _watch(self, stop: threading.Event) -> None:
        """Reload changed model files (every reload_interval) and write due updates."""
        next_check = time.monotonic() + self.reload_interval
        while not stop.wait(min(POLL_SECONDS, self.reload_interval or POLL_SECONDS)):
            try:
                models = self.model.loaded()
                if self.reload_interval and time.monotonic() >= next_check:
                    next_check = time.monotonic() + self.reload_interval
                    for model in models:
                        model.check()
                for model in models:
                    model.flush()
            except Exception:  # noqa: BLE001 - a stopped watcher would write nothing more
                self._throttle.log(logging.ERROR, "reload or write failed", exc_info=True)

    # -- one request -------------------------------------------------------------
    def _dispatch(self, request: Request) -> None:
        """A complete request (the reader's thread): to a worker, or shed with ERROR."""
        if self.pool.submit(request):
            return
        self._send(request, reply_line("ERROR", "scorer out of threads; try again"))

    def _answer(self, request: Request) -> None:
        """Answer one complete request (a worker thread)."""
        try:
            reply = self._reply_to(request)
        except Exception as exc:  # noqa: BLE001 - one bad request must not stop the server
            self._throttle.log(logging.ERROR, "unexpected error while answering a client",
                               exc_info=True)
            reply = reply_line("ERROR", describe_error(exc))
        self._send(request, reply)

    def _send(self, request: Request, reply: bytes) -> None:
        conn = request.conn
        if self.key is not None and request.nonce is not None:
            line = reply[:-1]
            reply = line + b" mac=" + reply_mac(self.key, request.nonce, line) + b"\n"
        try:
            # The reply is one line, which the socket's buffer takes at once; the bound is
            # for a client that stopped reading with its buffer full.
            conn.settimeout(max(1.0, request.deadline - time.monotonic()))
            conn.sendall(reply)
            if self.telemetry is not None:
                self.telemetry.observe_reply(reply, time.monotonic() - request.started)
        except OSError as exc:  # the client left, or was too slow
            self._throttle.log(logging.INFO, "client dropped: %s", exc.strerror or exc)
        finally:
            conn.close()
            self.reader.release(request.held)

    def _reply_to(self, request: Request) -> bytes:
        user = request.user
        try:
            if self.user_from_peer:
                user = _peer_user(request.conn, user)
            if user is not None and hasattr(self.model, "shared"):
                user = user_key(user)  # one form for the model and the verdict's record
            if request.verb == b"PING":
                return self._pong(user)
            if request.verb == b"SCORE":
                return self._score(request, user)
            if request.verb == b"STATE":
                return self._state(request, user)
            return self._learn(request, user)
        except TextnbError as exc:  # a bad user name, one model and a user, a model that will not load
            return reply_line("ERROR", describe_error(exc))

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

    def _score(self, request: Request, user: str | None) -> bytes:
        cost_ratio = float(request.words[3]) if len(request.words) == 4 else None
        model, source = self.model.for_scoring(user)
        spam_filter = model.spam_filter  # this request's model, whatever reloads
        with model.lock:
            try:
                v = score_with(spam_filter, request.message, cost_ratio)
            except Exception as exc:  # noqa: BLE001 - reported to the client, which falls back
                self._throttle.log(logging.ERROR, "scoring failed", exc_info=True)
                return reply_line("ERROR", describe_error(exc))
            self.requests += 1
        if self.recorder is not None:
            self.recorder.submit(request.message, v, user=user, model=source, explainer=model)
        return reply_line("OK", v.label, v.log_odds, v.p_spam, v.threshold)

    def _state(self, request: Request, user: str | None) -> bytes:
        """STATE: the label the message is learned under in the model a lesson for
        ``user`` goes to ('absent': not learned), from the ledger, so that a client whose
        LEARN or FORGET went unanswered can tell whether it was made. A user without a
        model of their own gets the shared model's, which their first lesson copies.
        Refused where learning is: it says what a model was taught."""
        if self.learning_refused:
            return reply_line("ERROR", "no state: " + _LEARNING_REFUSED.format(
                where=_where(self.address, self.socket_mode)))
        model, _ = self.model.for_scoring(user)
        digest = message_digest(request.message)
        with model.lock:
            label = model.spam_filter.ledger.label(digest)
        return reply_line("STATE", label or "absent")

    def _learn(self, request: Request, user: str | None) -> bytes:
        kind = request.verb.decode()
        label = request.words[2].decode() if kind == "LEARN" else None
        not_done = f"not {'learned' if label else 'forgotten'}: "
        if self.learning_refused:
            return reply_line("ERROR", not_done + _LEARNING_REFUSED.format(
                where=_where(self.address, self.socket_mode)))
        model = self.model.for_learning(user)
        margin = min(LEARN_MARGIN, self.timeout / 4)
        try:
            outcome = model.update(kind, request.message, label,
                                   apply_by=request.deadline - margin)
        except Exception as exc:  # noqa: BLE001 - the client is told: not learned
            # A full disk or a journal that cannot be written: this update fails, the
            # scorer serves on (the journal keeps every update acknowledged before).
            self._throttle.log(logging.ERROR, "%s failed: %s", kind.lower(),
                               describe_error(exc), exc_info=not isinstance(exc, OSError))
            return reply_line("ERROR", not_done + describe_error(exc))
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
    if asked is not None and user_key(asked) != user_key(name):
        raise TextnbError(f"user {asked!r} refused: this connection is from user {name!r} "
                          "(--user-from-peer)")
    return name


def _attempt(what: str, step) -> None:
    try:
        step()
    except Exception as exc:  # noqa: BLE001 - the next steps (the writes) must run
        log.error("at shutdown, cannot %s (%s)", what, describe_error(exc))


def check_who_may_teach(per_user: bool, address, socket_mode: int, user_from_peer: bool,
                        allow_any_user_to_teach: bool) -> None:
    """Refuse per-user models where the scorer cannot tell who connects (ServerError).

    Any local user can connect to a TCP port, or to a socket whose mode has o+w, and
    name any user; a group-writable socket trusts its group as the owner is trusted.
    """
    if (per_user and _anyone_connects(address, socket_mode) and not user_from_peer
            and not allow_any_user_to_teach):
        raise ServerError(_ANY_USER_REFUSED.format(where=_where(address, socket_mode)))


def _anyone_connects(address, socket_mode: int) -> bool:
    return isinstance(address, tuple) or bool(socket_mode & 0o002)


def _where(address, socket_mode: int) -> str:
    if isinstance(address, tuple):
        return f"TCP port {address[1]}"
    return f"socket {address} (mode {socket_mode:04o})"


def _connection_limit() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, soft // 2))


_ANY_USER_REFUSED = (
    "per-user models on {where} would let every local user read and teach every "
    "user's model: the scorer cannot tell who connects. Serve them on a Unix socket "
    "with --user-from-peer (e.g. --socket /run/textnb/scorer.sock --socket-mode 0666 "
    "--user-from-peer), or keep the socket 0600 for one system user (the MDA's); or, "
    "if every local user may teach every model, pass --allow-any-user-to-teach")
_LEARNING_REFUSED = (
    "any local user can connect to {where}, so this scorer learns only with "
    "--allow-any-user-to-teach (or serve on a Unix socket of mode 0600)")
