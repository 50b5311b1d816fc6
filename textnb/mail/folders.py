"""Labelled mailbox layouts: which folders of a mail store are spam and which are ham.

The sources themselves (a Maildir, an mbox, a directory tree, an index) are read
by ``textnb.mail.sources``; this module only turns "my Maildir, spam is in Junk" into
lists of folders for it. Three on-disk Maildir layouts are in use:

- Maildir++ (Dovecot's default, Courier, mbsync ``SubFolders Maildir++``): the inbox
  is ``~/Maildir/{cur,new}``, folder ``Junk`` is ``~/Maildir/.Junk/``, a nested folder
  ``Archive/2024`` is ``~/Maildir/.Archive.2024/``;
- "fs" (Dovecot ``LAYOUT=fs``, mbsync/isync ``SubFolders Verbatim``): folder ``Junk``
  is ``~/Maildir/Junk/``, ``Archive/2024`` is ``~/Maildir/Archive/2024/``, the inbox
  often ``~/Maildir/INBOX/``;
- flattened without the leading dot (offlineimap's default ``sep = .``): folder
  ``[Gmail]/Spam`` is ``~/Mail/[Gmail].Spam/``, the inbox ``~/Mail/INBOX/``.

Folder names match case-insensitively, and ``INBOX.`` prefixes (Courier's
namespace) are tried too.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import MailboxFormatError, SourceError

__all__ = ["SPAM_FOLDER_NAMES", "maildir_folder", "maildir_sources"]

# Tried in this order when no --spam-folder is given: Dovecot/Thunderbird/Apple
# "Junk", Gmail and many webmails "Spam" ("[Gmail]/Spam" through an IMAP sync),
# Outlook "Junk E-mail"/"Junk Email", Yahoo "Bulk Mail".
SPAM_FOLDER_NAMES = ("Junk", "Spam", "[Gmail]/Spam", "Junk E-mail", "Junk Email", "Bulk Mail")


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() and (path / "new").is_dir()


def _candidates(name: str) -> list[str]:
    parts = [p for p in name.strip("/").split("/") if p]
    dotted = ".".join(parts)
    return ["." + dotted, ".INBOX." + dotted, "/".join(parts), "INBOX/" + "/".join(parts), dotted]


def _find(root: Path, relative: str) -> Path | None:
    """root/relative, matching each path component case-insensitively."""
    path = root
    for part in relative.split("/"):
        exact = path / part
        if exact.is_dir():
            path = exact
            continue
        try:
            names = {entry.lower(): entry for entry in os.listdir(path)}
        except OSError:
            return None
        if part.lower() not in names:
            return None
        path = path / names[part.lower()]
    return path if _is_maildir(path) else None


def maildir_folder(root: str | os.PathLike, name: str) -> Path | None:
    """The Maildir of folder ``name`` (``Junk``, ``Archive/2024``) under ``root``, or None."""
    root = Path(root)
    if name.upper() == "INBOX":
        if _is_maildir(root):
            return root
        return _find(root, "INBOX")
    for relative in _candidates(name):
        found = _find(root, relative)
        if found is not None:
            return found
    return None


def _folders(root: Path) -> list[str]:
    """Names of the Maildirs directly below root, for error messages."""
    try:
        return sorted(e.name for e in os.scandir(root) if e.is_dir() and _is_maildir(Path(e.path)))
    except OSError:
        return []


def maildir_sources(root: str | os.PathLike, spam_folders: list[str] | tuple = (),
                    ham_folders: list[str] | tuple = ()) -> tuple[list[Path], list[Path]]:
    """(spam Maildirs, ham Maildirs) of a mail store.

    root (str | PathLike): the Maildir root (``~/Maildir``).
    spam_folders (list[str]): folder names holding spam; empty: the first of
        ``SPAM_FOLDER_NAMES`` that exists.
    ham_folders (list[str]): folder names holding ham; empty: the inbox. Give
        ``INBOX`` with others to keep it (``--ham-folder INBOX --ham-folder Archive``).
    RETURNS (tuple[list[Path], list[Path]]): raises MailboxFormatError naming the
        folders that exist when a named one is missing.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise SourceError(f"no such Maildir: '{root}'; give the folder holding your mail "
                          "(e.g. --maildir ~/Maildir)")

    def resolve(name: str, role: str) -> Path:
        found = maildir_folder(root, name)
        if found is None:
            present = ", ".join(_folders(root)) or "none"
            raise MailboxFormatError(
                f"no {role} folder '{name}' in Maildir '{root}' (folders there: {present}); "
                f"name the right one with --{role}-folder")
        return found

    if spam_folders:
        spam = [resolve(name, "spam") for name in spam_folders]
    else:
        found = next((f for f in (maildir_folder(root, n) for n in SPAM_FOLDER_NAMES)
                      if f is not None), None)
        if found is None:
            present = ", ".join(_folders(root)) or "none"
            raise MailboxFormatError(
                f"no spam folder in Maildir '{root}' (looked for {', '.join(SPAM_FOLDER_NAMES)}; "
                f"folders there: {present}); name it with --spam-folder")
        spam = [found]
    ham = [resolve(name, "ham") for name in (ham_folders or ["INBOX"])]
    overlap = set(spam) & set(ham)
    if overlap:
        raise MailboxFormatError(f"folder '{overlap.pop()}' is given as both spam and ham")
    return spam, ham
