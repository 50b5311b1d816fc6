"""Loaders for the public spam corpora, in the layouts they are published in.

The corpora are never part of this repository. They live beside it, in
``../shared/corpora`` (seen from the project root), or wherever
``$TEXTNB_CORPORA`` points; ``corpora/manifest.toml`` records where each one
comes from, its terms of use and its message counts.

Every loader yields :class:`Example` objects lazily, in sorted ``relpath``
order, so two runs on the same files see the same sequence. ``relpath`` is the
message's path below the corpus folder, with ``/`` separators; it names the
message and also decides its fold (:func:`is_test`), so the train/test split is
reproducible from the path alone:

- ``spamassassin``: folder ``spamassassin/``, relpath ``easy_ham/00001.7c53…``;
- ``enron``: folder ``enron-spam/`` (enron1..3 pooled), relpath ``enron1/ham/0001.1999-12-10.farmer.ham.txt``;
- ``lingspam``: folder ``lingspam/bare/``, relpath ``part1/3-1msg1.txt`` (spam iff the name starts ``spmsg``);
- ``sms``: file ``sms-spam-collection/SMSSpamCollection``, relpath the 0-based line number, ``00000``.

For Ling-Spam the folder is ``bare/``, not ``lingspam/``: the other three
versions of the corpus (lemmatised, stop-listed) are not stored, so the
``bare/`` prefix would carry no information.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import MailboxFormatError, SourceError

__all__ = ["CORPORA", "Example", "corpora_root", "is_test", "iter_corpus", "split"]

CORPORA = ("spamassassin", "enron", "lingspam", "sms")

# SpamAssassin 20030228: folder -> label. `_meta/` (the corpus's own command
# file) and the per-folder `cmds` files of the original tarballs are not
# messages.
_SPAMASSASSIN_FOLDERS = {
    "easy_ham": "ham",
    "easy_ham_2": "ham",
    "hard_ham": "ham",
    "spam": "spam",
    "spam_2": "spam",
}
_NOT_MESSAGES = frozenset({"cmds"})
_ENRON_PARTS = ("enron1", "enron2", "enron3")
_LINGSPAM_PARTS = tuple(f"part{i}" for i in range(1, 11))


@dataclass(frozen=True)
class Example:
    """One labelled message of a public corpus.

    relpath (str): Path below the corpus folder, ``/``-separated; decides the fold.
    label (str): ``"spam"`` or ``"ham"``.
    raw (bytes): The message as stored (SMS: an empty line, then the text of the line, UTF-8:
        a message with no headers).
    """

    relpath: str
    label: str
    raw: bytes


def corpora_root() -> Path | None:
    """Locate the folder holding the public corpora.

    RETURNS (Path | None): ``$TEXTNB_CORPORA`` if set, else
        ``<project root>/../shared/corpora``; None when that folder does not exist.
    """
    env = os.environ.get("TEXTNB_CORPORA")
    if env:
        root = Path(env)
    else:
        root = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
    return root if root.is_dir() else None


def iter_corpus(name: str, root: Path | None = None) -> Iterator[Example]:
    """Yield every message of a public corpus, lazily, in sorted relpath order.

    name (str): One of ``CORPORA``.
    root (Path | None): The folder holding the corpora; None means :func:`corpora_root`.
    YIELDS (Example): The messages, read from disk one at a time.
    """
    if name not in _LOADERS:
        raise ValueError(f"unknown corpus {name!r}; known corpora: {', '.join(CORPORA)}")
    if root is None:
        root = corpora_root()
        if root is None:
            raise SourceError(
                "the public corpora were not found; set TEXTNB_CORPORA to the folder "
                "holding spamassassin/, enron-spam/, lingspam/ and sms-spam-collection/"
            )
    return _LOADERS[name](Path(root))


def is_test(relpath: str, n_folds: int = 5) -> bool:
    """Whether a message is in the test fold of the corpora README's split.

    relpath (str): The message's path below its corpus folder (``Example.relpath``).
    n_folds (int): One message in ``n_folds`` goes to the test fold.
    RETURNS (bool): ``int(md5(relpath).hexdigest(), 16) % n_folds == 0``.
    """
    digest = hashlib.md5(relpath.encode("utf-8")).hexdigest()
    return int(digest, 16) % n_folds == 0


def split(examples: Iterable[Example]) -> tuple[list[Example], list[Example]]:
    """Split messages into the README's train and test folds (test = 1 in 5).

    examples (Iterable[Example]): Messages of one corpus, e.g. ``iter_corpus(name)``.
    RETURNS (tuple[list[Example], list[Example]]): ``(train, test)``, each in input order.
    """
    if isinstance(examples, Example):
        raise TypeError("split() expects an iterable of Example, got a single Example")
    train: list[Example] = []
    test: list[Example] = []
    for example in examples:
        (test if is_test(example.relpath) else train).append(example)
    return train, test


def _require_dir(path: Path) -> Path:
    if not path.is_dir():
        raise SourceError(f"corpus folder {path} is missing; check TEXTNB_CORPORA or the corpora README")
    return path


def _message_files(folder: Path) -> list[Path]:
    """The message files of one folder, sorted; skips dotfiles and `cmds`."""
    return sorted(
        p
        for p in _require_dir(folder).iterdir()
        if p.is_file() and not p.name.startswith(".") and p.name not in _NOT_MESSAGES
    )


def _iter_spamassassin(root: Path) -> Iterator[Example]:
    base = _require_dir(root / "spamassassin")
    for folder in sorted(_SPAMASSASSIN_FOLDERS):
        label = _SPAMASSASSIN_FOLDERS[folder]
        for path in _message_files(base / folder):
            yield Example(f"{folder}/{path.name}", label, path.read_bytes())


def _iter_enron(root: Path) -> Iterator[Example]:
    base = _require_dir(root / "enron-spam")
    for part in _ENRON_PARTS:
        for label in ("ham", "spam"):
            for path in _message_files(base / part / label):
                yield Example(f"{part}/{label}/{path.name}", label, path.read_bytes())


def _iter_lingspam(root: Path) -> Iterator[Example]:
    base = _require_dir(root / "lingspam" / "bare")
    for part in sorted(_LINGSPAM_PARTS):
        for path in _message_files(base / part):
            label = "spam" if path.name.startswith("spmsg") else "ham"
            yield Example(f"{part}/{path.name}", label, path.read_bytes())


def _iter_sms(root: Path) -> Iterator[Example]:
    path = root / "sms-spam-collection" / "SMSSpamCollection"
    if not path.is_file():
        raise SourceError(f"corpus file {path} is missing; check TEXTNB_CORPORA or the corpora README")
    with path.open("rb") as f:
        for line_no, line in enumerate(f):
            label, tab, text = line.rstrip(b"\r\n").partition(b"\t")
            if not tab or label not in (b"ham", b"spam"):
                raise MailboxFormatError(
                    f"{path} line {line_no + 1}: expected 'ham<TAB>text' or 'spam<TAB>text', "
                    f"got {line[:40]!r}"
                )
            # The leading empty line marks "no header section", as textnb.sources.iter_tsv
            # does: otherwise a text such as 'K:)k:)good' parses as a header field.
            yield Example(f"{line_no:05d}", label.decode("ascii"), b"\n" + text)


_LOADERS = {
    "spamassassin": _iter_spamassassin,
    "enron": _iter_enron,
    "lingspam": _iter_lingspam,
    "sms": _iter_sms,
}
