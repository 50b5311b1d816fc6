"""A model per user, from one scorer: ``textnb serve --models DIR``.

Layout: ``DIR/_shared/model.tnb`` (or ``--model PATH``) is the shared model;
``DIR/<user>/model.tnb`` is a user's own. A client names the user (``textnb-client
--user NAME``: ``user=NAME`` on the request line).

- **Scoring.** A user with a model of their own is scored with it; any other user
  (and a request without a user) with the shared model.
- **Learning.** Goes to the user's model. The first learn creates it as a copy of
  the shared model (its counts and its ledger) plus that message, so a user's
  model holds the shared counts and the user's own added to them. That is the best
  of the combinations measured (bench/per_user.py; Enron 1-3 as three users, each
  scored on the latest fifth of their own mail; the table is in
  docs/learning.md#a-model-per-user): mean (1-AUC)% 0.558 with the shared model alone,
  0.506 / 0.399 / 0.138 with the user's 25 + 25 / 200 + 200 / all messages added, against
  4.392 / 1.282 / 0.184 for the user's messages alone. So the user's counts are added
  from the first learned message, not switched to at some count.
  A message the shared model learned under one label and the user moves to the
  other is moved in the user's copy only. The cost: the shared model's later updates
  do not reach users who already have a model (retrain theirs, or delete it to start
  again from the shared).
- **Names.** 1-64 characters of ``A-Z a-z 0-9 . _ @ + -``, starting with a letter or
  digit: no ``/``, no ``..`` path, no ``_shared``; anything else is refused with an
  ERROR naming the rule (:func:`check_user`). A name picks its model case-blind:
  ``Alice`` and ``alice`` are one user, ``alice`` (:func:`user_key`, which every
  way in uses: ``--user``, ``--user-from-peer``, the milter's recipients).
- **Bounds.** A user's model in memory is a whole copy of the shared model, so at most
  ``max_resident`` of them stay loaded: past that the least recently used is written
  to its file (its journal then holds nothing the file lacks) and dropped, and its
  next request loads it again, scoring as before. A first learn creates a user's model
  only while the folder holds fewer than ``max_users`` users' folders, since any
  client can make up names and each model costs the shared model's size on disk;
  past that the learn is refused with an ERROR naming the bound (the admin raises it,
  or removes the folders of users who left). Both bounds and the memory a resident
  user costs are in docs/learning.md#bounds.

What stops one user's client reading or training another user's model: by default,
nothing but the socket. The scorer's Unix socket is mode 0600, so only the scorer's
own OS user can connect, and every client that connects may name any user; that is
the right model when the mail server (Dovecot, the MDA) runs the clients as one
system user on behalf of everybody. With ``--user-from-peer`` the scorer reads the
connecting process's uid (``SO_PEERCRED``) and uses that uid's login name as the
user, refusing a request that names another; for that the socket must be reachable
by the users (``--socket-mode 0666`` in a folder they can enter), and each user's
client runs as that user (e.g. Dovecot's IMAPSieve with per-user system accounts);
the clients accept another user's socket only in a folder no third user can write to.
Over TCP there is no peer uid and ``--user-from-peer`` is refused. A user's folder is
created 0700, so no other uid reads a model file directly. tests/test_isolation.py
checks all of this with real OS users (docs/learning.md#isolation).
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path

from ..errors import TextnbError
from ..modelfile.journal import journal_path
from .server import FLUSH_SECONDS, ResidentModel
from .user_names import UserNameError, check_user, is_user_name, user_key

__all__ = ["MAX_RESIDENT_USERS", "MAX_USERS", "RECIPIENT_MODES", "SHARED", "ModelSet",
           "TooManyUsersError", "UserNameError", "check_user", "user_from_recipients", "user_key"]

SHARED = "_shared"
# Users' models kept loaded at once (``textnb serve --max-resident-users``). Each costs
# the shared model's memory again: 59 MB for SpamAssassin's (632,398 tokens, a 5.0 MB
# file), so 16 of them about 0.9 GB (bench/resident_users.py, docs/learning.md#bounds);
# a dropped one costs a model load on its next request (0.4 s for that model).
MAX_RESIDENT_USERS = 16
# Users' models that first learns may create in one folder (``textnb serve
# --max-users``): each is the shared model's size on disk (5 MB for SpamAssassin's),
# and its name is whatever a client sends.
MAX_USERS = 1000


class TooManyUsersError(TextnbError):
    """A first learn would create a user's model beyond the folder's bound."""


RECIPIENT_MODES = ("local", "address")


def user_from_recipients(recipients, mode: str = "local") -> str | None:
    """The user whose model scores a message for these envelope recipients, or None
    for the shared model (the milter's rule; docs/milter.md).

    recipients (list[str]): as the MTA sends them (``<alice@example.org>``, any case).
    mode (str): 'local': the local part without a ``+extension`` (``alice``), as Dovecot's
        ``%n`` names a system user; 'address': the whole address (virtual users).
    One user for all the recipients: that user. Recipients of different users: None,
    because a milter adds one set of header fields to the one copy of the message that
    all of them get. A name :func:`user_key` refuses (or no recipient): None.
    """
    users = set()
    for recipient in recipients:
        address = recipient.strip().strip("<>")
        local, _, domain = address.rpartition("@")
        if mode == "local":
            name = (local or domain).split("+", 1)[0]
        else:
            name = address
        try:
            users.add(user_key(name))
        except UserNameError:
            return None
    return users.pop() if len(users) == 1 else None


class ModelSet:
    """The shared model and the users' models, loaded on first use.

    folder (Path): DIR of ``--models DIR``.
    shared (Path | None): the shared model; None: ``DIR/_shared/model.tnb``.
    flush_seconds (float): as ResidentModel's.
    max_resident (int): users' models kept loaded; past it the least recently used is
        written and dropped (module docstring, "Bounds").
    max_users (int): users' folders a first learn may bring the folder to.
    """

    def __init__(self, folder, shared=None, flush_seconds: float | None = None, load=None,
                 max_resident: int = MAX_RESIDENT_USERS, max_users: int = MAX_USERS):
        if max_resident < 1 or max_users < 0:
            raise TextnbError(f"max_resident={max_resident} and max_users={max_users}: keep "
                              "at least one user's model loaded, and allow 0 or more users")
        self.folder = Path(folder)
        self.flush_seconds = FLUSH_SECONDS if flush_seconds is None else flush_seconds
        self.max_resident, self.max_users = max_resident, max_users
        self.lock = threading.Lock()  # one scorer lock: scoring holds the GIL anyway
        self._load = load
        self.shared = ResidentModel(Path(shared) if shared else self.folder / SHARED / "model.tnb",
                                    load, lock=self.lock, flush_seconds=self.flush_seconds)
        self._users: OrderedDict[str, _UserModel] = OrderedDict()  # least recent first
        self._pins: dict[str, int] = {}  # users with a learn in progress: never dropped
        self._names: set[str] | None = None  # users' folders, listed on first need
        self._registry = threading.Lock()

    def _path(self, user: str) -> Path:
        return self.folder / check_user(user) / "model.tnb"

    def user_model(self, user: str, create: bool = False):
        """The user's ResidentModel; None when they have none and ``create`` is False.
        TooManyUsersError when ``create`` would make a model past ``max_users``."""
        user = user_key(user)
        with self._registry:
            return self._resident(user, create)

    def _resident(self, user: str, create: bool):
        path = self._path(user)
        model = self._users.get(user)
        if model is not None:
            self._users.move_to_end(user)
            return model
        exists = _has_model(path)
        if not (create or exists):
            return None
        if not exists:
            self._make_room(user)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        model = _UserModel(path, self._load, lock=self.lock, flush_seconds=self.flush_seconds,
                           tokenizer_of=self.shared, new_config=self.shared.spam_filter.config)
        if not path.exists():
            with self.lock:  # start from the shared counts (module docstring)
                model.spam_filter = _copy_filter(self.shared.spam_filter)
                model.seq = 0  # the user's journal numbers its own records
                model.catch_up()
        self._users[user] = model
        self._drop_least_recent(keep=user)  # not the model just loaded: it is to be used
        return model

    def _make_room(self, user: str, reserve: bool = True) -> None:
        """Refuse a new user's folder past ``max_users`` (listed again when the bound
        seems reached: the admin may have removed some); ``reserve``: count it now."""
        if self._names is None or (user not in self._names
                                   and len(self._names) >= self.max_users):
            self._names = {entry.name for entry in os.scandir(self.folder)
                           if entry.is_dir(follow_symlinks=False) and entry.name != SHARED
                           and is_user_name(entry.name)}
        if user not in self._names and len(self._names) >= self.max_users:
            raise TooManyUsersError(
                f"user {user!r} has no model, and '{self.folder}' already holds "
                f"{len(self._names)} users' models, the most a first learn may create "
                f"(--max-users {self.max_users}); raise --max-users, or remove the folders "
                "of users who no longer need a model")
        if reserve:
            self._names.add(user)

    def _drop_least_recent(self, keep: str | None = None) -> None:
        """Write and drop the least recently used users' models past ``max_resident``,
        but not ``keep``'s; one with a learn in progress stays (it goes when that learn
        is done: a learn must never reach a dropped model, whose journal a newer copy
        may have read already)."""
        while len(self._users) > self.max_resident:
            user = next((u for u in self._users if u not in self._pins and u != keep), None)
            if user is None:
                return
            self._users.pop(user).retire()

    @contextmanager
    def _pinned(self, user: str):
        """The user's model, created if need be, kept loaded for the body of the ``with``."""
        with self._registry:
            model = self._resident(user, create=True)
            self._pins[user] = self._pins.get(user, 0) + 1
        try:
            yield model
        finally:
            with self._registry:
                self._pins[user] -= 1
                if not self._pins[user]:
                    del self._pins[user]
                self._drop_least_recent()

    # -- the interface ScorerServer uses (ResidentModel has the same) --------------
    def for_scoring(self, user: str | None):
        if user is None:
            return self.shared, "shared"
        model = self.user_model(user)
        if model is None:
            return self.shared, "shared"
        return model, "user"

    def for_learning(self, user: str | None):
        if user is None:
            return self.shared
        user = user_key(user)
        with self._registry:  # refused before the message is read into a journal: an
            # ERROR reply, not a failed learn (whose traceback a client could repeat)
            if user not in self._users and not _has_model(self._path(user)):
                self._make_room(user, reserve=False)
        return _Learner(self, user)

    def loaded(self) -> list:
        with self._registry:
            return [self.shared, *self._users.values()]

    # for PING without a user, and the CLI's start-up line
    @property
    def spam_filter(self):
        return self.shared.spam_filter

    @property
    def loads(self) -> int:
        return self.shared.loads


class _Learner:
    """What ``ModelSet.for_learning`` gives for a user: ``update`` finds the user's model
    (loading or creating it) and keeps it loaded until the update is applied, so the
    update never lands in a model that was dropped meanwhile (whose journal a newer
    copy of the model might already have read)."""

    def __init__(self, models: ModelSet, user: str):
        self.models, self.user = models, user

    def update(self, kind: str, raw: bytes, label: str | None = None, **options) -> str:
        with self.models._pinned(self.user) as model:
            return model.update(kind, raw, label, **options)


class _UserModel(ResidentModel):
    """A user's ResidentModel, which ``retire`` writes and then makes inert: the
    watcher may still hold it in its list, and a dropped model must neither reload
    nor write the file over the copy that replaced it."""

    def __init__(self, *args, **kwargs):
        self._alive = threading.RLock()  # retire against check and flush
        self.retired = False
        super().__init__(*args, **kwargs)

    def check(self) -> bool:
        with self._alive:
            return False if self.retired else super().check()

    def flush(self, force: bool = False) -> bool:
        with self._alive:
            return False if self.retired else super().flush(force)

    def retire(self) -> None:
        """Write the updates the file lacks (each is in the journal already, so a write
        that fails loses nothing: the next load replays them), then go inert."""
        with self._alive:
            if self.unwritten:
                super().flush(force=True)
            self.retired = True


def _has_model(path: Path) -> bool:
    """A user's model exists: its file, or a journal of updates not yet written to one."""
    journal = journal_path(path)
    return path.exists() or (journal.exists() and journal.stat().st_size > 0)


def _copy_filter(spam_filter):
    """A deep copy of a filter's counts, vocabulary and ledger, sharing its tokenizer."""
    tokenizer, workers = spam_filter._tokenizer, spam_filter.__dict__.get("_workers")
    spam_filter._tokenizer = None
    try:
        twin = copy.deepcopy(spam_filter)
    finally:
        spam_filter._tokenizer = tokenizer
    twin._tokenizer = tokenizer
    if workers is not None:
        del twin._workers
    return twin
