"""A model per user in the shared store: ``textnb serve --store URL --store-users``.

The file scorer's per-user models (``textnb.delivery.users``), with the store behind
them: the shared model is ``--store-model``'s; a user's own is the store's model named
``user:<name>`` (``user_key``: one name however it is written), so every host that
serves the store finds it.

- **Scoring.** A user with a model of their own is scored with it, any other with the
  shared model. Which users have one is read from the store at every poll, so a
  verdict never waits for the database.
- **Learning.** Goes to the user's model. The first learn creates it as a copy of the
  shared model as it is then (its ledger rows and its counts, in one transaction:
  ``SharedStore.copy_model``) plus that message, as the file scorer copies the shared
  file (docs/learning.md#a-model-per-user has the measurement behind the copy).
- **Bounds.** At most ``max_resident`` users' models stay loaded, each following the
  log with a listener of its own; past that the least recently used is dropped (its
  learns are in the store) and loaded again, from its snapshot and log, on its next
  request. A first learn creates a user's model only while the store holds fewer than
  ``max_users`` of them.
- **The outbox** is the host's one (``Sender``): the learns of every model wait in it,
  in order, while the database is away. A user's first learn needs the database (the
  copy is made there); while it is away, it is refused with an ERROR and the client
  says so.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ..errors import TextnbError
from ..modelfile.postgres.schema import StoreUnavailableError
from ..modelfile.postgres.shared_model import POLL_SECONDS, SharedModel
from .users import MAX_RESIDENT_USERS, MAX_USERS
from .user_names import user_key

__all__ = ["USER_PREFIX", "SharedModelSet"]

USER_PREFIX = "user:"


class SharedModelSet:
    """The shared model ``name`` of the store at ``url`` and its users' models.

    outbox (path): the host's outbox file; stop (Event): ends the listeners.
    """

    def __init__(self, url: str, name: str, outbox, stop: threading.Event,
                 poll: float = POLL_SECONDS, max_resident: int = MAX_RESIDENT_USERS,
                 max_users: int = MAX_USERS):
        self.url, self.stop, self.poll = url, stop, poll
        self.max_resident, self.max_users = max_resident, max_users
        self.shared = SharedModel(url, name, outbox=outbox).warmed()
        self.shared.follow(stop, poll)
        self._lock = threading.Lock()
        self._users: OrderedDict[str, tuple[SharedModel, threading.Event]] = OrderedDict()
        self._names = set(self.shared.store.names())
        self._names_read = time.monotonic()

    @property
    def spam_filter(self):
        return self.shared.spam_filter

    @property
    def loads(self) -> int:
        return self.shared.loads

    # -- the interface the server uses (as textnb.delivery.users.ModelSet) -------------
    def for_scoring(self, user: str | None):
        if user is not None and USER_PREFIX + user_key(user) in self._names:
            return self._resident(user_key(user)), "user"
        return self.shared, "shared"

    def for_learning(self, user: str | None):
        if user is None:
            return self.shared
        key = user_key(user)
        name = USER_PREFIX + key
        if name not in self._names:
            self._create(name)
        return self._resident(key)

    def loaded(self) -> list[SharedModel]:
        """The models in memory; the store's list of users' models is read again here, at
        most once a poll (the watcher asks every poll)."""
        if time.monotonic() - self._names_read >= self.poll:
            self._names_read = time.monotonic()
            try:
                self._names = set(self.shared.store.names())
            except StoreUnavailableError:
                pass  # the list as it was: users keep the models they had
        with self._lock:
            return [self.shared] + [model for model, _ in self._users.values()]

    # -- users' models -------------------------------------------------------------------
    def _create(self, name: str) -> None:
        users = sum(n.startswith(USER_PREFIX) for n in self._names)
        if users >= self.max_users:
            raise TextnbError(f"not learned: the store holds {users} users' models, the "
                              f"most this scorer creates (--max-users {self.max_users})")
        try:
            self.shared.store.copy_model(self.shared.model_id, name, self.shared.snapshot_at)
        except StoreUnavailableError as exc:
            raise TextnbError(f"not learned: a user's first learn makes their model in the "
                              f"store, which is away ({exc})") from None
        self._names.add(name)

    def _resident(self, key: str) -> SharedModel:
        with self._lock:
            if key in self._users:
                self._users.move_to_end(key)
                return self._users[key][0]
        model = SharedModel(self.url, USER_PREFIX + key, outbox=self.shared.sender)
        # One lock for every model, as the file scorer's models share one: they share
        # one tokenizer (one spaCy), whose caches are not for threads.
        model.lock = self.shared.lock
        if model.spam_filter.config.tokenizer == self.shared.spam_filter.config.tokenizer:
            model.spam_filter._tokenizer = self.shared.spam_filter.tokenizer
        stop = threading.Event()
        with self._lock:
            if key in self._users:  # another thread loaded it meanwhile
                model.close()
                return self._users[key][0]
            model.follow(stop, self.poll)
            self._users[key] = (model, stop)
            while len(self._users) > self.max_resident:
                _, (old, old_stop) = self._users.popitem(last=False)
                old_stop.set()
                old.close()
        return model

    def close(self) -> None:
        with self._lock:
            for model, stop in self._users.values():
                stop.set()
                model.close()
            self._users.clear()
        self.shared.close()
