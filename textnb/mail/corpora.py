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
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import MailboxFormatError, SourceError
from ..labels import LABELS
from .arrival import DATE_FIELD, posix_time

__all__ = ["CORPORA", "CHRONOLOGICAL", "Example", "chronological_split", "corpora_root",
           "delivery_order", "is_test", "iter_corpus", "message_time", "split"]

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
        root = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
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


# Corpora with a date per message, so a chronological split is defined (corpora README):
# SpamAssassin by its Date: header, Enron-Spam by the date in its file names.
CHRONOLOGICAL = ("spamassassin", "enron")
_ENRON_DATE = re.compile(r"^\d+\.(\d{4}-\d{2}-\d{2})\.")


def message_time(corpus: str, example: Example) -> float | None:
    """When a message was sent, as a POSIX timestamp, or None when it has no usable date.

    SpamAssassin: the first ``Date:`` field of the header (a date without a zone is read
    as UTC); Enron-Spam: the day in the file name (``0001.1999-12-10.farmer.ham.txt``).
    """
    if corpus == "enron":
        m = _ENRON_DATE.match(example.relpath.rsplit("/", 1)[-1])
        if not m:
            return None
        from datetime import datetime, timezone
        return datetime.strptime(m.group(1), "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()
    if corpus != "spamassassin":
        raise ValueError(f"no dates for corpus {corpus!r}; dated corpora: {', '.join(CHRONOLOGICAL)}")
    header = example.raw.split(b"\n\n", 1)[0].replace(b"\r\n\n", b"\n")
    m = DATE_FIELD.search(header)
    return posix_time(m.group(1)) if m else None


def _by_time(corpus: str, examples: Iterable[Example]) -> list[Example]:
    """Sorted by date, undated or unparseable ones first, ties by relpath (corpora README)."""
    def key(example: Example):
        when = message_time(corpus, example)
        return (when is not None, when or 0.0, example.relpath)
    return sorted(examples, key=key)


def chronological_split(corpus: str, examples: Iterable[Example]
                        ) -> tuple[list[Example], list[Example]]:
    """The corpora README's chronological split: per class (and for Enron per set), sorted
    by date, the latest fifth (``cut = int(n * 0.8)``) is the test set.

    Ham and spam in these corpora come from different sources and years, so one cut
    over both would put a whole class on one side; hence the cut per class.
    RETURNS (tuple[list[Example], list[Example]]): ``(train, test)``, each in date order
    (classes interleaved by date, ties by relpath).
    """
    groups: dict[tuple[str, str], list[Example]] = {}
    for example in examples:
        part = example.relpath.split("/", 1)[0] if corpus == "enron" else ""
        groups.setdefault((part, example.label), []).append(example)
    train: list[Example] = []
    test: list[Example] = []
    for key in sorted(groups):
        ordered = _by_time(corpus, groups[key])
        cut = int(len(ordered) * 0.8)
        train.extend(ordered[:cut])
        test.extend(ordered[cut:])
    return _by_time(corpus, train), _by_time(corpus, test)


def delivery_order(corpus: str, examples: Iterable[Example]) -> list[Example]:
    """Both classes interleaved in the order they would have arrived in: the order of the
    online ("classify, then learn") protocol.

    SpamAssassin: by ``Date:`` (undated ones first). Enron-Spam: its hams and spams come
    from different years, so a date order would put every ham first; each set is taken in
    the corpus's own numbering instead (the leading number of the file name, which
    interleaves ham and spam, each in date order: the order Metsis et al. (CEAS 2006) used
    for their incremental experiments), enron1, then enron2, then enron3.
    """
    if corpus == "enron":
        def key(example: Example):
            part, _, filename = example.relpath.split("/")
            return part, int(filename.split(".", 1)[0]), example.relpath
        return sorted(examples, key=key)
    return _by_time(corpus, examples)


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
        for label in LABELS:
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
            # The leading empty line marks "no header section", as textnb.mail.sources.iter_tsv
            # does: otherwise a text such as 'K:)k:)good' parses as a header field.
            yield Example(f"{line_no:05d}", label.decode("ascii"), b"\n" + text)


_LOADERS = {
    "spamassassin": _iter_spamassassin,
    "enron": _iter_enron,
    "lingspam": _iter_lingspam,
    "sms": _iter_sms,
}
