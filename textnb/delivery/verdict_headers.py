"""The delivery path: a message in, the same message out with verdict headers added.

A delivery agent (procmail, maildrop, Sieve's filter extension, a Postfix content
filter) pipes each message through ``textnb filter`` and files it by a header or
by the exit code. Two rules shape this module:

- **Byte for byte.** The output is the input with header lines inserted at the end
  of the header section, written with the message's own line ending (CRLF stays
  CRLF). Nothing is re-serialised: the ``email`` package would re-fold headers,
  normalise line endings and re-encode 8-bit bodies. The one other change is that
  earlier copies of the fields textnb writes are dropped (bogofilter does the same
  with ``X-Bogosity``, SpamAssassin with ``X-Spam-*``), so a verdict forged by the
  sender or left by an upstream filter cannot sit beside ours.
- **A filter must never eat mail.** :func:`filter_message` turns every fault in
  scoring or header insertion into "pass the message through unchanged" plus an
  error text; the caller writes the error to stderr and exits 3.

Exit codes follow bogofilter: 0 spam, 1 ham, 2 unsure, 3 error.

This module imports nothing beyond ``collections``: the thin client
(:mod:`textnb.delivery.client`) uses it without loading spaCy, NumPy or SciPy. The
in-process scorer imports the model code only when it is built.
"""

from __future__ import annotations

from collections import namedtuple

from .. import __version__
from ..labels import LABELS

__all__ = ["Verdict", "EXIT_CODES", "EXIT_ERROR", "verdict_fields", "header_end",
           "add_verdict", "add_headers", "filter_message", "exit_code", "in_process_scorer",
           "learn_verdict"]

EXIT_CODES = {"spam": 0, "ham": 1, "unsure": 2}
EXIT_ERROR = 3

STATUS = b"X-TextNB-Status"
SCORE = b"X-TextNB-Score"
SA_FLAG = b"X-Spam-Flag"
SA_STATUS = b"X-Spam-Status"

# What the resident scorer sends back, and what the in-process scorer returns: the
# fields of textnb.decision.costs.Decision, without importing it (it needs NumPy).
Verdict = namedtuple("Verdict", "label log_odds p_spam threshold")


def verdict_fields(verdict: Verdict, spamassassin: bool = False) -> list[tuple[bytes, bytes]]:
    """The header fields (name, value) that carry a verdict, as ASCII bytes.

    verdict (Verdict): label 'spam', 'ham' or 'unsure', log-odds, P(spam), threshold.
    spamassassin (bool): also write SpamAssassin's ``X-Spam-Flag: YES`` (spam only, as
        SpamAssassin does) and ``X-Spam-Status: Yes|No, score=... required=...``, with
        the log-odds as the score and the threshold as ``required``; 'unsure' is 'No'.
    """
    label = verdict.label
    if label not in EXIT_CODES:
        raise ValueError(f"verdict label {label!r} is not one of {', '.join(EXIT_CODES)}")
    fields = [
        (STATUS, label.encode("ascii")),
        (SCORE, (f"log-odds={verdict.log_odds:.3f}; p={verdict.p_spam:.6f}; "
                 f"threshold={verdict.threshold:.3f}; version={__version__}").encode("ascii")),
    ]
    if spamassassin:
        is_spam = label == "spam"
        if is_spam:
            fields.append((SA_FLAG, b"YES"))
        fields.append((SA_STATUS, (f"{'Yes' if is_spam else 'No'}, score={verdict.log_odds:.1f} "
                                   f"required={verdict.threshold:.1f} tests=TEXTNB "
                                   f"version=textnb-{__version__}").encode("ascii")))
    return fields


def _field_name(line: bytes) -> bytes | None:
    """The name of a header field line, or None when the line is not a field.

    The rule is the standard library parser's (``email.feedparser.headerRE``): a name
    is any run of printable ASCII without a colon, followed by a colon.
    """
    colon = line.find(b":")
    if colon < 0:
        return None
    name = line[:colon]
    if name.translate(None, _NAME_BYTES):  # a byte outside 33-126 (a space, 8-bit)
        return None
    return name


_NAME_BYTES = bytes(range(33, 127))


def _header_lines(raw: bytes):
    """(start, end of text, end with line ending, kind, name) per header-section line.

    kind is 'field' (name: value), 'more' (a continuation line, or an mbox 'From '
    line) or 'end' (the blank line or the first line that cannot be a header, where
    the header section stops; that line itself is not part of it). The last tuple is
    always 'end'; its start is where new fields go.
    """
    start, n = 0, len(raw)
    while start < n:
        newline = raw.find(b"\n", start)
        if newline < 0:
            stop = text_end = n
        else:
            stop = newline + 1
            text_end = newline - 1 if newline > start and raw[newline - 1] == 13 else newline
        line = raw[start:text_end]
        if not line:
            yield start, text_end, stop, "end", None
            return
        if line[0] in b" \t" or line.startswith(b"From "):
            yield start, text_end, stop, "more", None
        else:
            name = _field_name(line)
            if name is None:
                yield start, text_end, stop, "end", None
                return
            yield start, text_end, stop, "field", name
        start = stop
    yield n, n, n, "end", None


def _line_ending(raw: bytes, text_end: int, stop: int) -> bytes:
    return raw[text_end:stop] if stop > text_end else b""


def header_end(raw: bytes) -> tuple[int, bytes]:
    """Where the header section ends and the line ending to write new fields with.

    RETURNS (tuple[int, bytes]): the offset of the blank line that ends the header
        section (or of the first line that cannot be a header, or len(raw) when the
        message is all header), and the line ending of the last header line (else of
        the line at the offset, else b"\\n").
    """
    eol = b""
    for start, text_end, stop, kind, _ in _header_lines(raw):
        if kind == "end":
            return start, eol or _line_ending(raw, text_end, stop) or _first_line_ending(raw)
        eol = _line_ending(raw, text_end, stop) or eol
    raise AssertionError("unreachable: _header_lines always ends with 'end'")


def _first_line_ending(raw: bytes) -> bytes:
    newline = raw.find(b"\n")
    return b"\r\n" if newline > 0 and raw[newline - 1] == 13 else b"\n"


def add_verdict(raw: bytes, verdict: Verdict, spamassassin: bool = False) -> bytes:
    """``raw`` with the verdict's fields added, replacing earlier fields of those names.

    With ``spamassassin``, earlier X-Spam-Flag and X-Spam-Status fields go too, even
    when the verdict writes no X-Spam-Flag (ham): an upstream 'YES' must not survive.
    """
    names = (STATUS, SCORE, SA_FLAG, SA_STATUS) if spamassassin else (STATUS, SCORE)
    return add_headers(raw, verdict_fields(verdict, spamassassin), replace=names)


def add_headers(raw: bytes, fields: list[tuple[bytes, bytes]], replace=None) -> bytes:
    """``raw`` with ``fields`` added at the end of its header section, byte for byte.

    raw (bytes): the message as received, with or without an mbox 'From ' line.
    fields (list[tuple[bytes, bytes]]): (name, value) pairs, ASCII, unfolded.
    replace (Iterable[bytes] | None): names of fields to drop from the header section
        (with their continuation lines); None: the names in ``fields``.
    RETURNS (bytes): the header lines before the insertion point, minus the replaced
        fields, then the new fields, each ending in the message's own line ending,
        then every remaining byte of ``raw`` unchanged. When the last header line has
        no line ending (a message that stops inside its header), one is added first.
    """
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError(f"add_headers expects the message as bytes, got {type(raw).__name__}")
    raw = bytes(raw)
    replaced = {name.lower() for name in (replace if replace is not None
                                          else (name for name, _ in fields))}
    end, eol = header_end(raw)
    kept: list[bytes] = []
    copy_from = 0  # start of the run of header bytes not yet copied to ``kept``
    dropping = False
    for start, _, stop, kind, name in _header_lines(raw):
        if kind == "end":
            break
        if kind == "field":
            dropping = name.lower() in replaced
        elif raw.startswith(b"From ", start):
            dropping = False
        if dropping:
            kept.append(raw[copy_from:start])
            copy_from = stop
    kept.append(raw[copy_from:end])
    head = b"".join(kept)
    if head and not head.endswith(b"\n"):
        head += eol  # the message stopped inside its header, without a line ending
    block = b"".join(name + b": " + value + eol for name, value in fields)
    return head + block + raw[end:]


def exit_code(verdict: Verdict | None, always_zero: bool = False) -> int:
    """bogofilter's exit codes: 0 spam, 1 ham, 2 unsure, 3 error (no verdict); or always 0."""
    if always_zero:
        return 0
    return EXIT_ERROR if verdict is None else EXIT_CODES[verdict.label]


FilterResult = namedtuple("FilterResult", "output verdict error")
FilterResult.__doc__ = """What the filter writes.

output (bytes): the message to deliver. verdict (Verdict | None): None on a fault.
error (str | None): the fault, one line."""


def filter_message(raw: bytes, score, spamassassin: bool = False) -> FilterResult:
    """Score one message and add the verdict headers; on any fault pass it through.

    raw (bytes): the message as received.
    score (Callable[[bytes], Verdict]): the scorer (in process, or the resident one).
    spamassassin (bool): also write SpamAssassin-compatible headers.
    RETURNS (FilterResult): the message with headers and the verdict; or, when
        scoring or insertion fails in any way, the message unchanged, verdict None
        and the error as one line of text.
    """
    try:
        verdict = score(raw)
        return FilterResult(add_verdict(raw, verdict, spamassassin), verdict, None)
    except Exception as exc:  # noqa: BLE001 - a filter must never eat mail: every fault,
        # expected or not, still delivers the message; the error goes to stderr.
        return FilterResult(bytes(raw), None, describe_error(exc))


def describe_error(exc: BaseException) -> str:
    """One line: the message of a textnb error, or the type and text of any other."""
    from_textnb = type(exc).__module__.startswith("textnb")
    text = str(exc) or type(exc).__name__
    return text if from_textnb else f"{type(exc).__name__}: {text}"


def in_process_scorer(model_path, cost_ratio: float | None = None):
    """A scorer that loads the model into this process (spaCy, NumPy) on first use.

    model_path (str | Path): the model file.
    cost_ratio (float | None): λ for the decision; None: the model's own.
    RETURNS (Callable[[bytes], Verdict]): loading errors (a missing or damaged model)
        are raised on the first call, so filter_message turns them into a pass-through.
    """
    state = {}

    def score(raw: bytes) -> Verdict:
        if "filter" not in state:
            from ..modelfile import store
            from ..text.tokenize import import_spacy_modules

            state["filter"] = store.load_while(model_path, import_spacy_modules)
        return score_with(state["filter"], raw, cost_ratio)

    return score


def learn_verdict(model_path, raw: bytes, verdict: Verdict, lock_timeout: float = 30.0) -> bool:
    """Train the model on a message under the label it was just given (bogofilter's -u).

    Through ``textnb.modelfile.retrain`` and the model's ledger: locked against other updates,
    written atomically, and a message already learned under that label is not
    counted twice. Unsure messages are not learned. The message goes to a private
    temporary file (mode 0600) because retrain reads sources by path.
    RETURNS (bool): whether the model file was rewritten.
    """
    if verdict.label not in LABELS:  # an unsure verdict is not learned
        return False
    import os
    import tempfile

    from ..modelfile.retrain import retrain

    fd, tmp = tempfile.mkstemp(prefix="textnb-learn-", suffix=".eml")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        report = retrain(model_path, **{verdict.label: [tmp]}, lock_timeout=lock_timeout,
                         create=False)
    finally:
        os.unlink(tmp)
    return bool(report["written"])


def score_with(spam_filter, raw: bytes, cost_ratio: float | None = None) -> Verdict:
    """The verdict of a loaded SpamFilter on one raw message."""
    from ..mail.sources import RawMessage

    (scored,) = spam_filter.classify([RawMessage("-", bytes(raw), None)], cost_ratio)
    d = scored.decision
    return Verdict(d.label, float(d.log_odds), float(d.p_spam), float(d.threshold))
