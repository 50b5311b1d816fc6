"""A model as plain text, one record per line, and back: ``textnb export/import --format text``.

The model file (``textnb.modelfile.store``) is a ZIP of NumPy arrays: compact and checked,
but opaque to ``grep`` and ``diff`` and tied to NumPy's array format. The dump is
the model in a form any tool of the next twenty years reads (bogofilter's
``bogoutil -d``, SpamAssassin's ``sa-learn --backup`` play the same part): UTF-8
text, fields separated by one TAB, one record per line, the record's kind first.
``docs/model-file.md`` gives the grammar line by line; in short::

    textnb-dump	1                          format name and version
    written-by	textnb 0.1.0                who wrote it (not read back)
    setting	model.alpha	0.1             every setting, value as JSON
    messages	spam	1897                 messages learned per class
    threshold	null / calibration	null   what `tune` learned, as JSON
    numeric	mean	2x7	4.1 ...           numeric-feature model arrays (when on)
    class	spam	1897                    the class counts of the naive Bayes model
    token	subject:free	3	41	44         token, ham count, spam count, messages holding it
    ledger	<64 hex>	spam	<16 hex>       a learned message: SHA-256, label, tokens hash
    end	51234	6047                         how many token and ledger lines there are

Exactness. Counts are written as whole numbers when they are (they always are
after ordinary training) and otherwise as Python's shortest round-tripping
``repr``; JSON values use the same. Token lines come in the model's column order
(the order tokens were first learned) and ledger lines in the ledger's order, so
``import`` rebuilds the very arrays that were exported and the model scores bit for
bit as the original did (tests/test_dump.py checks the log-odds with
``np.array_equal``).

Diff and sort. The dump is a function of the model alone, so two dumps of one
model are byte-identical and ``diff`` shows what changed between two models.
Import accepts the records in any order (only the token lines' order matters, as
the column order), so a ``sort``-ed dump still imports; its columns are then in
sorted order, which changes the order scores are summed in, so the log-odds may
differ in the last bits (tests/test_dump.py measures it).

Damage. A dump cut short has no ``end`` line, or one whose counts disagree with
the lines present; every other defect (an unknown record, a count that is not a
non-negative number, a repeated token, a bad escape, invalid UTF-8, a setting out
of range) is a :class:`DumpFormatError` naming the line and what is wrong with it.
"""

from __future__ import annotations

import io
import json
import math
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from ..config import FilterConfig, config_from_dict
from ..errors import ConfigError, ModelFormatError
from ..models.ledger import DIGEST_SIZE, LABELS, Ledger
from ..spamfilter import SpamFilter
from .checks import InvalidModelError, check_model, loads_json

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "DumpFormatError", "escape", "unescape",
           "dump_lines", "dumps", "loads", "load", "export_file", "import_file"]

FORMAT_NAME = "textnb-dump"
FORMAT_VERSION = 1
_SEP = "\t"

# -- tokens --------------------------------------------------------------------------
# Tokens are any str (a tokenizer keeps lone surrogates from undecodable text, which
# UTF-8 cannot hold): backslash, tab, newline, CR and every character Python calls
# unprintable are written as escapes; the rest (accented letters, CJK) as themselves,
# so `grep 'subject:caf\u00e9'` is `grep 'subject:café'`.
_SIMPLE = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNSIMPLE = {v[1]: k for k, v in _SIMPLE.items()}
_ESCAPE = re.compile(r"\\(?:([\\tnr])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.?))")


def _escape_char(ch: str) -> str:
    if ch in _SIMPLE:
        return _SIMPLE[ch]
    if ch.isprintable() or ch == " ":
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(token: str) -> str:
    """The token as a dump field: no tab, newline or unprintable character left in it."""
    if token.isprintable() and "\\" not in token:  # the common case: nothing to escape
        return token
    return "".join(_escape_char(ch) for ch in token)


def unescape(text: str) -> str:
    """The inverse of :func:`escape`; ValueError naming a bad escape."""
    if "\\" not in text:
        return text

    def one(match: re.Match) -> str:
        simple, x, u, big, bad = match.groups()
        if simple:
            return _UNSIMPLE[simple]
        if bad is not None:
            raise ValueError(f"'\\{bad}' is not an escape (use \\\\, \\t, \\n, \\r, \\xHH, "
                             "\\uHHHH or \\UHHHHHHHH)")
        code = int(x or u or big, 16)
        if code > 0x10FFFF:
            raise ValueError(f"'\\U{big}' is beyond Unicode (U+10FFFF)")
        return chr(code)

    return _ESCAPE.sub(one, text)


# -- numbers -------------------------------------------------------------------------
_COUNT = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?")
_REAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?")
_EXACT_INT = 2 ** 53  # float64 holds every whole number below it


def _number(x: float) -> str:
    """A float as the shortest text that reads back to the same bits."""
    if x.is_integer() and abs(x) < _EXACT_INT:
        return str(int(x))
    return repr(x)


def _numbers(values: np.ndarray) -> list[str]:
    return [_number(v) for v in values.tolist()]


# -- writing -------------------------------------------------------------------------
_COMMENTS = (
    "# textnb model dump: TAB-separated records, one per line; grammar in docs/model-file.md",
    "# token<TAB>TOKEN<TAB>ham count<TAB>spam count<TAB>messages holding it "
    "(tokens escape \\\\ \\t \\n \\r and unprintable characters)",
    "# ledger<TAB>SHA-256 of the normalised message<TAB>label<TAB>64-bit hash of its tokens",
)


def dump_lines(spam_filter: SpamFilter) -> Iterator[str]:
    """The dump's lines (without line ends), in the order :func:`dumps` writes them."""
    counts = spam_filter.counts()  # NotFittedError for an untrained filter
    yield _SEP.join((FORMAT_NAME, str(FORMAT_VERSION)))
    yield f"written-by{_SEP}textnb {__version__}"
    yield from _COMMENTS
    for section, values in spam_filter.config.to_dict().items():
        for key, value in values.items():
            yield _SEP.join(("setting", f"{section}.{key}", json.dumps(value)))
    for label in LABELS:
        yield _SEP.join(("messages", label, str(int(spam_filter.n_learned.get(label, 0)))))
    yield _SEP.join(("threshold", json.dumps(spam_filter.threshold)))
    yield _SEP.join(("calibration", json.dumps(spam_filter.calibration, sort_keys=True)))
    # A numeric model that learned nothing (the filter was trained from tokens) has no
    # arrays: the dump holds none, and import gives back the same unfitted model.
    if hasattr(getattr(spam_filter, "numeric", None), "class_count_"):
        for name, array in spam_filter.numeric.to_arrays().items():
            array = np.asarray(array, dtype=np.float64)
            yield _SEP.join(("numeric", name, "x".join(map(str, array.shape)),
                             " ".join(_numbers(array.ravel()))))
    for label, n in zip(LABELS, _numbers(counts["class_count"])):
        yield _SEP.join(("class", label, n))
    ham, spam = (_numbers(row) for row in counts["feature_count"])
    docs = _numbers(counts["doc_freq"])
    for token, h, s, d in zip(counts["tokens"], ham, spam, docs):
        yield _SEP.join(("token", escape(token), h, s, d))
    ledger = spam_filter.ledger
    for digest in ledger:
        yield _SEP.join(("ledger", digest.hex(), ledger.label(digest),
                         f"{ledger.tokens_hash(digest):016x}"))
    if ledger.pruned_at:  # a size bound dropped tokens: what forget needs to stay exact
        ledger.cover(len(counts["tokens"]))
        born_lines = [(t, b) for t, b in zip(counts["tokens"], ledger.born.tolist()) if b]
        yield _SEP.join(("history", str(ledger.next_serial), str(ledger.pruned_at),
                         str(len(born_lines))))
        for token, born in born_lines:
            yield _SEP.join(("born", escape(token), str(born)))
        for digest in ledger:
            yield _SEP.join(("serial", digest.hex(), str(ledger.serial(digest))))
    yield _SEP.join(("end", str(len(counts["tokens"])), str(len(ledger))))


def dumps(spam_filter: SpamFilter) -> bytes:
    """The dump as UTF-8 bytes, every line ending in LF."""
    return "".join(line + "\n" for line in dump_lines(spam_filter)).encode("utf-8")


# -- reading -------------------------------------------------------------------------
class DumpFormatError(ModelFormatError):
    """A text dump is damaged, cut short, hand-edited into something invalid, or not a dump."""


# record kind -> how many TAB-separated fields it has, its kind included
_FIELDS = {FORMAT_NAME: 2, "written-by": 2, "setting": 3, "messages": 3, "threshold": 2,
           "calibration": 2, "numeric": 4, "class": 3, "token": 5, "ledger": 4, "end": 3,
           "history": 4, "born": 3, "serial": 3}
_SINGLE = (FORMAT_NAME, "written-by", "threshold", "calibration", "end", "history")


@dataclass
class _Reader:
    """What the lines said so far, with the line each thing came from."""

    name: str
    once: dict = field(default_factory=dict)        # single record kind -> (line, fields)
    settings: dict = field(default_factory=dict)    # "section.key" -> (line, value)
    messages: dict = field(default_factory=dict)    # label -> (line, int)
    classes: dict = field(default_factory=dict)     # label -> (line, float)
    numeric: dict = field(default_factory=dict)     # array name -> (line, ndarray)
    token_line: dict = field(default_factory=dict)  # token -> line
    tokens: list = field(default_factory=list)
    ham: list = field(default_factory=list)
    spam: list = field(default_factory=list)
    docs: list = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)
    ledger_line: dict = field(default_factory=dict)  # digest -> line
    born: dict = field(default_factory=dict)         # token -> (line, serial)
    serials: dict = field(default_factory=dict)      # digest -> (line, serial)

    def error(self, line: int | None, problem: str, fix: str = "") -> DumpFormatError:
        where = f"'{self.name}' line {line}" if line else f"'{self.name}'"
        fix = fix or "correct it, or export the model again with 'textnb export --format text'"
        return DumpFormatError(f"text dump {where}: {problem}; {fix}")

    # -- one line --------------------------------------------------------------------
    def read(self, n: int, raw: bytes) -> None:
        if raw.endswith(b"\r"):  # an editor's CRLF: a CR inside a token is always escaped
            raw = raw[:-1]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(n, f"byte {exc.start + 1} is not UTF-8 ({raw[exc.start:exc.start + 1]!r})",
                             "write tokens' unusual characters as \\xHH / \\uHHHH escapes") from None
        if not line.strip() or line.startswith("#"):
            return
        fields = line.split(_SEP)
        kind = fields[0]
        if kind not in _FIELDS:
            if not self.once and not self.tokens and not self.settings:
                raise self.error(n, f"not a textnb text dump (it starts {line[:40]!r})",
                                 "give the file 'textnb export --format text' wrote")
            raise self.error(n, f"unknown record {kind[:40]!r}", "records are "
                             + ", ".join(_FIELDS) + ", each followed by TAB-separated fields")
        if len(fields) != _FIELDS[kind]:
            raise self.error(n, f"a {kind} record has {_FIELDS[kind] - 1} TAB-separated "
                             f"field(s) after '{kind}', this line has {len(fields) - 1}",
                             "separate fields by exactly one TAB (a TAB inside a token is "
                             "written \\t)")
        if kind in _SINGLE:
            if kind in self.once:
                raise self.error(n, f"a second '{kind}' record (the first is on line "
                                 f"{self.once[kind][0]})", "keep one of them")
            self.once[kind] = (n, fields[1:])
            if kind == FORMAT_NAME:
                self._check_version(n, fields[1])
            return
        getattr(self, "_" + kind)(n, *fields[1:])

    def _check_version(self, n: int, text: str) -> None:
        if text != str(FORMAT_VERSION):
            newer = text.isdigit() and int(text) > FORMAT_VERSION
            raise self.error(n, f"format version {text!r}; this textnb ({__version__}) reads "
                             f"version {FORMAT_VERSION}",
                             "upgrade textnb (pip install -U textnb)" if newer
                             else "export the model again with this textnb")

    def _count(self, n: int, text: str, what: str) -> float:
        if not _COUNT.fullmatch(text):
            raise self.error(n, f"{what} {text[:40]!r} is not a count (a number >= 0 such as "
                             "12 or 0.5)")
        value = float(text)
        if not math.isfinite(value):
            raise self.error(n, f"{what} {text[:40]!r} is too large")
        return value

    def _label(self, n: int, text: str) -> str:
        if text not in LABELS:
            raise self.error(n, f"label {text[:40]!r} is neither ham nor spam")
        return text

    def _setting(self, n: int, dotted: str, value: str) -> None:
        if dotted in self.settings:
            raise self.error(n, f"setting {dotted} is given twice (first on line "
                             f"{self.settings[dotted][0]})", "keep one of them")
        section, _, key = dotted.partition(".")
        if not (section and key):
            raise self.error(n, f"setting name {dotted[:40]!r} is not SECTION.KEY (e.g. "
                             "model.alpha)")
        try:
            parsed = loads_json(value, f"the value of {dotted}")
        except json.JSONDecodeError as exc:
            raise self.error(n, f"the value of {dotted}, {value[:40]!r}, is not JSON ({exc.msg})",
                             "write strings in double quotes, lists as [..], true/false/null "
                             "in lower case") from None
        try:  # names and types, one setting at a time, so an error names its line
            config_from_dict({section: {key: parsed}})
        except ConfigError as exc:
            raise self.error(n, str(exc), "use a setting 'textnb train --help' lists") from None
        self.settings[dotted] = (n, parsed)

    def _messages(self, n: int, label: str, text: str) -> None:
        self._per_class(self.messages, n, "messages", label, text)

    def _class(self, n: int, label: str, text: str) -> None:
        self._per_class(self.classes, n, "class", label, text)

    def _per_class(self, table: dict, n: int, kind: str, label: str, text: str) -> None:
        label = self._label(n, label)
        if label in table:
            raise self.error(n, f"a second '{kind} {label}' record (the first is on line "
                             f"{table[label][0]})", "keep one of them")
        value = self._count(n, text, f"the {label} count")
        if kind == "messages" and not value.is_integer():
            raise self.error(n, f"{text!r} messages is not a whole number")
        table[label] = (n, int(value) if kind == "messages" else value)

    def _numeric(self, n: int, name: str, shape: str, values: str) -> None:
        if name in self.numeric:
            raise self.error(n, f"numeric array {name!r} is given twice (first on line "
                             f"{self.numeric[name][0]})", "keep one of them")
        if not re.fullmatch(r"[0-9]+(?:x[0-9]+)*", shape):
            raise self.error(n, f"shape {shape!r} of numeric array {name!r} is not like 2x7")
        dims = tuple(int(d) for d in shape.split("x"))
        items = values.split(" ") if values else []
        bad = next((v for v in items if not _REAL.fullmatch(v)), None)
        if bad is not None:
            raise self.error(n, f"{bad[:40]!r} in numeric array {name!r} is not a number")
        if len(items) != math.prod(dims):
            raise self.error(n, f"numeric array {name!r} of shape {shape} needs "
                             f"{math.prod(dims)} numbers, the line has {len(items)}")
        self.numeric[name] = (n, np.array([float(v) for v in items], dtype=np.float64).reshape(dims))

    def _token(self, n: int, text: str, ham: str, spam: str, docs: str) -> None:
        try:
            token = unescape(text)
        except ValueError as exc:
            raise self.error(n, f"token {text[:60]!r}: {exc}") from None
        if token in self.token_line:
            raise self.error(n, f"token {text[:60]!r} is listed twice (first on line "
                             f"{self.token_line[token]})",
                             "add the counts into one line and delete the other")
        h = self._count(n, ham, f"the ham count of {text[:60]!r}")
        s = self._count(n, spam, f"the spam count of {text[:60]!r}")
        d = self._count(n, docs, f"the message count of {text[:60]!r}")
        # Each message holding the token adds at least 1 to its count in its class.
        if d > h + s:
            raise self.error(n, f"token {text[:60]!r} is in {docs} messages but counted only "
                             f"{_number(h + s)} times (ham {ham} + spam {spam})",
                             "a token's message count is at most its ham + spam count")
        self.token_line[token] = n
        self.tokens.append(token)
        self.ham.append(h)
        self.spam.append(s)
        self.docs.append(d)

    def _ledger(self, n: int, digest: str, label: str, tokens_hash: str) -> None:
        if not re.fullmatch(f"[0-9a-f]{{{2 * DIGEST_SIZE}}}", digest):
            raise self.error(n, f"{digest[:70]!r} is not a SHA-256 digest "
                             f"({2 * DIGEST_SIZE} lower-case hex digits)")
        # 16 hex digits: version 1; 17, the first 1: version 2 (``textnb.models.ledger``).
        if not re.fullmatch("1?[0-9a-f]{16}", tokens_hash):
            raise self.error(n, f"tokens hash {tokens_hash[:40]!r} is not 16 lower-case hex "
                             "digits (version 1) or 17 beginning with 1 (version 2)")
        key = bytes.fromhex(digest)
        if key in self.ledger:
            raise self.error(n, f"message {digest[:12]}... is in the ledger twice (first on "
                             f"line {self.ledger_line[key]})", "keep one of the two lines")
        self.ledger.record(key, self._label(n, label), int(tokens_hash, 16))
        self.ledger_line[key] = n

    def _whole(self, n: int, text: str, what: str) -> int:
        if not text.isdigit():
            raise self.error(n, f"{what} {text[:40]!r} is not a whole number >= 0")
        return int(text)

    def _born(self, n: int, text: str, serial: str) -> None:
        try:
            token = unescape(text)
        except ValueError as exc:
            raise self.error(n, f"token {text[:60]!r}: {exc}") from None
        self.born[token] = (n, self._whole(n, serial, f"the serial {text[:60]!r} is born at"))

    def _serial(self, n: int, digest: str, serial: str) -> None:
        key = bytes.fromhex(digest) if re.fullmatch("[0-9a-f]{64}", digest) else None
        if key is None:
            raise self.error(n, f"{digest[:70]!r} is not a SHA-256 digest")
        self.serials[key] = (n, self._whole(n, serial, "serial"))

    def _history(self) -> None:
        """Serials and column history (only in dumps of pruned models: textnb.modelfile.prune)."""
        if "history" not in self.once:
            if self.born or self.serials:
                line = min(n for n, _ in (*self.born.values(), *self.serials.values()))
                raise self.error(line, "born/serial lines without the 'history' line",
                                 "restore it from the original dump")
            return
        line, (next_serial, pruned_at, n_born) = self.once["history"]
        if self._whole(line, n_born, "born line count") != len(self.born):
            raise self.error(line, f"'history' says {n_born} born lines, the dump holds "
                             f"{len(self.born)} (lines lost or added)",
                             "restore the lines from the original dump")
        state = np.array([self._whole(line, next_serial, "next serial"),
                          self._whole(line, pruned_at, "pruned-at serial")], np.int64)
        missing = next((d for d in self.ledger if d not in self.serials), None)
        if missing is not None:
            raise self.error(self.ledger_line[missing], f"message {missing.hex()[:12]}... has "
                             "no 'serial' line", "restore it from the original dump")
        unknown = next((t for t in self.born if t not in self.token_line), None)
        if unknown is not None:
            raise self.error(self.born[unknown][0], f"'born' names token {unknown[:60]!r}, "
                             "which has no token line", "delete the line")
        born = np.array([self.born.get(t, (0, 0))[1] for t in self.tokens], np.int64)
        arrays = self.ledger.to_arrays()
        serial = np.array([self.serials[d][1] for d in self.ledger], np.int64)
        try:
            self.ledger = Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"],
                                             arrays["ledger_tokens"], serial, born,
                                             np.full(len(born), state[0], np.int64), state,
                                             arrays["ledger_hash_version"])
        except ValueError as exc:
            raise self.error(line, f"the history does not fit the ledger ({exc})") from None

    # -- the whole -------------------------------------------------------------------
    def finish(self, last_line: int) -> SpamFilter:
        if FORMAT_NAME not in self.once:
            raise self.error(None, f"no '{FORMAT_NAME}<TAB>{FORMAT_VERSION}' line: not a textnb "
                             "text dump", "give the file 'textnb export --format text' wrote")
        if "end" not in self.once:
            raise self.error(last_line, "the dump stops without its 'end' line: it was cut "
                             "short (truncated)", "restore the whole file or export it again")
        end_line, (n_tokens, n_ledger) = self.once["end"]
        found = (str(len(self.tokens)), str(len(self.ledger)))
        if (n_tokens, n_ledger) != found:
            raise self.error(end_line, f"'end' says {n_tokens} token and {n_ledger} ledger "
                             f"lines, the dump holds {found[0]} and {found[1]} (lines lost or "
                             "added)", "restore the lines, or if the edit was on purpose "
                             f"write 'end<TAB>{found[0]}<TAB>{found[1]}'")
        self._history()
        config = self._config()
        class_count = np.array([self._required(self.classes, "class", c)[1] for c in LABELS])
        feature_count = np.array([self.ham, self.spam], dtype=np.float64).reshape(2, -1)
        threshold = self._json(self.once.get("threshold"), "threshold", (float, int))
        calibration = self._json(self.once.get("calibration"), "calibration", (dict,))
        numeric = None
        if self.numeric:
            from ..models.numeric import from_arrays

            first = min(line for line, _ in self.numeric.values())
            if config.model.numeric_model == "none":
                raise self.error(first, "numeric arrays, but setting model.numeric_model is "
                                 "\"none\"", "delete the numeric lines or set the model")
            try:
                numeric = from_arrays(config.model.numeric_model,
                                      {k: a for k, (_, a) in self.numeric.items()})
            except (KeyError, ValueError) as exc:
                raise self.error(first, f"the numeric arrays do not make a "
                                 f"{config.model.numeric_model} model ({exc})") from None
        spam_filter = SpamFilter.from_counts(
            config, self.tokens, class_count, feature_count, np.array(self.docs, dtype=np.float64),
            n_learned={c: self._required(self.messages, "messages", c)[1] for c in LABELS},
            ledger=self.ledger, threshold=threshold, calibration=calibration, numeric=numeric)
        try:
            return check_model(spam_filter, f"text dump '{self.name}'")
        except InvalidModelError as exc:  # the same rules as every reader's, by line here
            raise self.error(self._line_of(exc), exc.problem) from None

    def _line_of(self, exc: InvalidModelError) -> int | None:
        """The line holding what ``exc`` (from textnb.modelfile.checks) found wrong."""
        if exc.column is not None:
            return self.token_line[self.tokens[exc.column]]
        if exc.field in self.settings:
            return self.settings[exc.field][0]
        if exc.field in ("threshold", "calibration"):
            return self.once[exc.field][0]
        table = {"class_count": self.classes, "ledger": self.classes,
                 "n_learned": self.messages}.get(exc.field)
        return min(line for line, _ in table.values()) if table else None

    def _required(self, table: dict, kind: str, label: str):
        if label not in table:
            raise self.error(None, f"no '{kind}<TAB>{label}<TAB>N' line",
                             "restore it from the original dump")
        return table[label]

    def _json(self, entry, kind: str, types: tuple):
        if entry is None:
            raise self.error(None, f"no '{kind}' line", f"add '{kind}<TAB>null' (untuned)")
        n, (text,) = entry
        try:
            value = loads_json(text, f"the {kind}")
        except json.JSONDecodeError as exc:
            raise self.error(n, f"the {kind} {text[:40]!r} is not JSON ({exc.msg})") from None
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            raise self.error(n, f"the {kind} {text[:40]!r} is not "
                             + ("a number" if float in types else "a JSON object") + " or null")
        return value

    def _config(self) -> FilterConfig:
        from .store import with_saved_defaults

        nested: dict = {}
        for dotted, (_, value) in self.settings.items():
            section, _, key = dotted.partition(".")
            nested.setdefault(section, {})[key] = value
        nested = with_saved_defaults(nested)
        expected = FilterConfig().to_dict()
        missing = [f"{s}.{k}" for s, keys in expected.items() for k in keys
                   if k not in nested.get(s, {})]
        if missing:
            # A default may have changed since the model was trained: never guess one.
            raise self.error(None, f"no setting line for {', '.join(missing[:5])}"
                             + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""),
                             "restore them from the original dump (the model was trained "
                             "with them, whatever today's defaults are)")
        try:
            return config_from_dict(nested).validate()
        except ConfigError as exc:
            text = str(exc)
            line = next((n for d, (n, _) in self.settings.items()
                         if text.startswith(f"{d}=")), None)
            raise self.error(line, text) from None


def _read(lines: Iterable[bytes], name: str) -> SpamFilter:
    reader = _Reader(name)
    n = 0
    for n, raw in enumerate(lines, start=1):
        if raw.endswith(b"\n"):
            reader.read(n, raw[:-1])
            continue
        try:  # the last line, without its line end: whole, or cut off in the middle
            reader.read(n, raw)
        except DumpFormatError as exc:
            raise reader.error(n, "the dump stops in the middle of this line: it was cut "
                               "short (truncated)", "restore the whole file or export it "
                               "again") from exc
    return reader.finish(n)


def loads(data: bytes, name: str = "<bytes>") -> SpamFilter:
    """A filter from a dump's bytes; DumpFormatError names the line that is wrong."""
    if data.startswith(b"PK\x03\x04"):
        raise DumpFormatError(f"'{name}' is a textnb model file, not a text dump; "
                              f"'textnb export --format text --model {name} OUT' makes one")
    return _read(io.BytesIO(data), name)


def load(path: str | Path) -> SpamFilter:
    """A filter from a dump file (read a line at a time); ``-`` reads standard input."""
    import sys

    if str(path) == "-":
        return _read(sys.stdin.buffer, "<stdin>")
    path = Path(path)
    try:
        with path.open("rb") as fh:
            if fh.read(4) == b"PK\x03\x04":
                raise DumpFormatError(f"'{path}' is a textnb model file, not a text dump; "
                                      f"'textnb export --format text --model {path} OUT' "
                                      "makes one")
            fh.seek(0)
            return _read(fh, str(path))
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise DumpFormatError(f"cannot read text dump '{path}': "
                              f"{(exc.strerror or str(exc)).lower()}; check the path") from None


# -- files -----------------------------------------------------------------------------
def export_file(model_path: Path, out: Path) -> dict:
    """``textnb export --format text``: write a model file's dump (atomically; ``-`` is
    standard output); returns a summary."""
    import sys

    from . import store

    spam_filter = store.load(model_path)
    start = time.perf_counter()
    data = dumps(spam_filter)
    if str(out) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        store.atomic_write(Path(out), data)
    return {"dump": str(out), "model": str(model_path), "format": "text",
            "tokens": len(spam_filter.vocabulary), "ledger": len(spam_filter.ledger),
            "messages": dict(spam_filter.n_learned), "size_bytes": len(data),
            "seconds": round(time.perf_counter() - start, 3)}


def import_file(source: Path, model_path: Path) -> dict:
    """``textnb import --format text``: a dump back to a model file, written atomically
    under the model's lock; returns the model's summary."""
    from . import store
    from .lock import model_lock

    spam_filter = load(source)
    with model_lock(model_path):
        store.save(spam_filter, model_path)
    summary = spam_filter.summary()
    summary.update(model=str(model_path), dump=str(source), tokens=len(spam_filter.vocabulary),
                   ledger=len(spam_filter.ledger))
    return summary
