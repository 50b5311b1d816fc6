"""The review page's logins: a JSON file of users, each an argon2 hash and a role.

``{"users": {"alice": {"hash": "$argon2id$...", "admin": false}, ...}}``, written
atomically (a temporary file, fsync, rename) with mode 0600: the hashes are slow to
guess (argon2id, argon2-cffi's defaults: 64 MiB and 3 passes per try), but nobody else
needs them. A login's name is the user whose verdicts it sees and whose model it
teaches (the name ``textnb-client --user`` gives, or the scorer's OS user for one
model); an admin sees and teaches every user's. Managed with ``textnb web-user``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..delivery.users import check_user
from ..errors import TextnbError

__all__ = ["Accounts", "AccountError", "ImapLogin"]


class AccountError(TextnbError):
    """A users file that cannot be read, or a user that is not there."""


class Accounts:
    """The users file. path (Path): created on the first ``add``."""

    def __init__(self, path):
        self.path = Path(path)
        from argon2 import PasswordHasher

        self._hasher = PasswordHasher()
        # a hash to check against when the name is unknown: the answer takes as long
        self._dummy = self._hasher.hash("not a password anyone has")
        self._cached: tuple = (None, {})  # (the file's stat key, its users)

    def load(self) -> dict:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise AccountError(f"cannot read the users file {self.path} ({exc})") from None
        key = (found.st_ino, found.st_mtime_ns, found.st_size)
        if self._cached[0] == key:  # every request checks its session against the file
            return self._cached[1]
        users = self._read()
        self._cached = (key, users)
        return users

    def proof(self, name: str) -> str | None:
        """What a session opened by a password in the file keeps to stay valid: a digest
        of the user's entry (hash and role), which a new password, a new role or the
        user's removal changes; None when the file does not hold the name."""
        import hashlib

        entry = self.load().get(name)
        if entry is None:
            return None
        return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise AccountError(f"cannot read the users file {self.path} ({exc}); fix or "
                               "remove it and add the users again with 'textnb web-user add'") from None
        users = data.get("users") if isinstance(data, dict) else None
        if not isinstance(users, dict):
            raise AccountError(f"the users file {self.path} has no 'users' object")
        return users

    def _save(self, users: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"users": users}, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def add(self, name: str, password: str, admin: bool = False) -> None:
        """Add a user or set a user's password and role."""
        check_user(name)
        if len(password) < 8:
            raise AccountError("a password needs at least 8 characters")
        users = self.load()
        users[name] = {"hash": self._hasher.hash(password), "admin": bool(admin)}
        self._save(users)

    def remove(self, name: str) -> None:
        users = self.load()
        if name not in users:
            raise AccountError(f"no user {name!r} in {self.path}")
        del users[name]
        self._save(users)

    def list(self) -> list[tuple[str, bool]]:
        return sorted((name, bool(entry.get("admin"))) for name, entry in self.load().items())

    def verify(self, name: str, password: str) -> dict | None:
        """{'name', 'admin'} if the password is the user's; None otherwise (the same
        work whether or not the user exists)."""
        from argon2.exceptions import Argon2Error, InvalidHashError

        entry = self.load().get(name)
        try:
            self._hasher.verify(entry["hash"] if entry else self._dummy, password)
        except (Argon2Error, InvalidHashError):
            return None
        return {"name": name, "admin": bool(entry.get("admin"))} if entry else None


class ImapLogin:
    """Check a name and password with the mail server's IMAP LOGIN.

    address (tuple[str, int]): the IMAP server, e.g. ('127.0.0.1', 143): a local one,
        since the password crosses the connection (STARTTLS is used when offered).
    timeout (float): seconds the server has to answer.
    """

    def __init__(self, address, timeout: float = 5.0):
        self.address, self.timeout = address, timeout

    def verify(self, name: str, password: str) -> dict | None:
        """{'name', 'admin': False} if the server takes the login; None otherwise."""
        import imaplib
        import ssl

        try:
            check_user(name)
        except TextnbError:
            return None
        try:
            imap = imaplib.IMAP4(*self.address, timeout=self.timeout)
        except OSError as exc:
            raise AccountError(f"the IMAP server {self.address[0]}:{self.address[1]} does not "
                               f"answer ({exc}); logins by mail password are not possible") from None
        try:
            if "STARTTLS" in imap.capabilities:
                imap.starttls(ssl.create_default_context())
            imap.login(name, password)
        except (imaplib.IMAP4.error, OSError, ssl.SSLError):
            return None
        finally:
            try:
                imap.logout()
            except (imaplib.IMAP4.error, OSError):
                pass
        return {"name": name, "admin": False}
