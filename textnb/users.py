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
  ERROR naming the rule (:func:`check_user`).

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
import re
import threading
from pathlib import Path

from .errors import TextnbError
from .learning import journal_path

__all__ = ["RECIPIENT_MODES", "SHARED", "ModelSet", "UserNameError", "check_user",
           "user_from_recipients"]

SHARED = "_shared"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


class UserNameError(TextnbError):
    """A user name that could leave the models folder or is not a plain name."""


def check_user(name: str) -> str:
    """``name`` if it is a safe user name; UserNameError naming the rule otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserNameError(f"user name {name!r} is not allowed; use 1-64 letters, digits and "
                            ". _ @ + -, starting with a letter or digit")
    return name


RECIPIENT_MODES = ("local", "address")


def user_from_recipients(recipients, mode: str = "local") -> str | None:
    """The user whose model scores a message for these envelope recipients, or None
    for the shared model (the milter's rule; docs/milter.md).

    recipients (list[str]): as the MTA sends them (``<alice@example.org>``, any case).
    mode (str): 'local': the local part without a ``+extension`` (``alice``), as Dovecot's
        ``%n`` names a system user; 'address': the whole address (virtual users).
    One user for all the recipients: that user. Recipients of different users: None,
    because a milter adds one set of header fields to the one copy of the message that
    all of them get. A name :func:`check_user` refuses (or no recipient): None.
    """
    users = set()
    for recipient in recipients:
        address = recipient.strip().strip("<>").lower()
        local, _, domain = address.rpartition("@")
        if mode == "local":
            name = (local or domain).split("+", 1)[0]
        else:
            name = address
        try:
            users.add(check_user(name))
        except UserNameError:
            return None
    return users.pop() if len(users) == 1 else None


class ModelSet:
    """The shared model and the users' models, loaded on first use.

    folder (Path): DIR of ``--models DIR``.
    shared (Path | None): the shared model; None: ``DIR/_shared/model.tnb``.
    flush_seconds (float): as ResidentModel's.
    """

    def __init__(self, folder, shared=None, flush_seconds: float | None = None, load=None):
        from .server import FLUSH_SECONDS, ResidentModel

        self._resident = ResidentModel
        self.folder = Path(folder)
        self.flush_seconds = FLUSH_SECONDS if flush_seconds is None else flush_seconds
        self.lock = threading.Lock()  # one scorer lock: scoring holds the GIL anyway
        self._load = load
        self.shared = ResidentModel(Path(shared) if shared else self.folder / SHARED / "model.tnb",
                                    load, lock=self.lock, flush_seconds=self.flush_seconds)
        self._users: dict[str, ResidentModel] = {}
        self._registry = threading.Lock()

    def _path(self, user: str) -> Path:
        return self.folder / check_user(user) / "model.tnb"

    def user_model(self, user: str, create: bool = False):
        """The user's ResidentModel; None when they have none and ``create`` is False."""
        path = self._path(user)
        with self._registry:
            model = self._users.get(user)
            if model is not None:
                return model
            if not (create or path.exists() or journal_path(path).exists()):
                return None
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            model = self._resident(path, self._load, lock=self.lock,
                                   flush_seconds=self.flush_seconds, tokenizer_of=self.shared,
                                   new_config=self.shared.spam_filter.config)
            if not path.exists():
                with self.lock:  # start from the shared counts (module docstring)
                    model.spam_filter = _copy_filter(self.shared.spam_filter)
                    model._replay(model.spam_filter)
            self._users[user] = model
            return model

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
        return self.user_model(user, create=True)

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
