"""HTML -> the text a reader sees, plus the URLs the markup points at.

Built on the stdlib ``html.parser``, which tolerates unclosed tags, stray ``<``
and bad entities. Spam hides words from naive tag-strippers (``V<b></b>iagra``,
comments inside words, text in ``<script>``), so the rule is "what a browser
renders": inline tags glue their neighbours, block tags break lines, script and
style are dropped, entities are decoded.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

__all__ = ["BLOCK_TAGS", "HtmlText", "html_to_text", "strip_tags", "tidy"]

# Content of these elements is never rendered as text.
_INVISIBLE = frozenset({"script", "style"})

# Elements that start a new line when rendered. Without the break, adjacent table
# cells ("<td>Buy</td><td>now</td>") would glue into one word ("Buynow").
BLOCK_TAGS = frozenset(
    "address article aside blockquote br caption center dd div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hr li main nav ol "
    "option p pre section table tbody td tfoot th thead title tr ul".split()
)

# Attributes whose values are URLs the reader can follow or the client fetches.
_URL_ATTRS = frozenset({"href", "src"})

# A tag for the crude strip. '<' excluded inside: with it, each '<' of '<a<a<...' (no
# '>') would scan to the end, quadratic
# (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
_TAG = re.compile(r"<[^<>]*>")


@dataclass(frozen=True)
class HtmlText:
    """Visible text and link targets of one HTML document.

    text (str): visible text, one rendered line per line, runs of spaces collapsed.
    urls (tuple[str, ...]): ``href``/``src`` values in document order, entities decoded.
    broken (bool): the parser gave up and the text came from a crude tag strip.
    cut (bool): the markup was longer than ``max_chars``; the rest was tag-stripped.
    """

    text: str
    urls: tuple[str, ...]
    broken: bool = False
    cut: bool = False


class _Extractor(HTMLParser):
    """Collects text chunks and URL attributes while the stdlib parser walks tags."""

    def __init__(self) -> None:
        # convert_charrefs=True decodes entities in text and attributes for us,
        # including ones split across feed() calls.
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.urls: list[str] = []
        self._skipping: str | None = None

    def updatepos(self, i: int, j: int) -> int:
        # The base class counts lines and columns for getpos(), which we never
        # call: work for nothing on every tag (docs/design/parsing-speed.md#html-by-lexbor).
        return j

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in _URL_ATTRS and value and value.strip():
                self.urls.append(value.strip())
        if tag in _INVISIBLE:
            self._skipping = tag
        elif tag in BLOCK_TAGS:
            self.chunks.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._skipping:
            self._skipping = None
        elif tag in BLOCK_TAGS:
            self.chunks.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skipping is None:
            self.chunks.append(data)


def tidy(text: str) -> str:
    """Collapse spaces within lines and drop empty lines."""
    # map and filter, not generator expressions: the same lines, with no Python step per
    # line (SpamAssassin's 961 HTML parts in its training split have 287,000 lines).
    return "\n".join(map(" ".join, filter(None, map(str.split, text.splitlines()))))


# The stdlib parser is given the markup in pieces of this many characters, so that an
# unfinished construct (a tag, comment or declaration still waiting for its end) is
# re-scanned once per piece rather than holding up the whole document.
_FEED = 65_536
# An unfinished construct longer than this is hostile or broken: its text is read by
# stripping tags crudely and the parser starts afresh after it. Waiting longer costs a
# re-scan of it per piece (10 MB of '<a<a<...' fed whole: minutes of CPU).
_MAX_PENDING = 262_144
# At the end of the markup the parser re-scans an unfinished construct once for every
# '<' after it: quadratic (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
# A leftover longer than this is tag-stripped instead.
_MAX_LEFTOVER = 4_096


# A '<' that cannot open a tag (not before a letter, '/', '!' or '?') is text, and the
# stdlib parser hands it over one character per call (a megabyte of them: seconds).
# Swapped for a Unicode noncharacter (reserved for a program's internal use) and back,
# it joins the text around it in one call; '&lt;' would still be one call per entity
# (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
_LONE_LT = re.compile(r"<(?![A-Za-z/!?])")
_LT_STAND_IN = "\ufdd0"


def strip_tags(markup: str) -> str:
    """Markup with every tag replaced by a space; entities stay as written (html.unescape
    calls back into Python once per entity: this is the strip for text past max_chars)."""
    return _TAG.sub(" ", markup)


def _crude(markup: str) -> str:
    """The text of markup the parser could not read: tags stripped, entities decoded."""
    return html.unescape(strip_tags(markup))


def html_to_text(markup: str, max_chars: int | None = None) -> HtmlText:
    """Render HTML to its visible text and collect its link URLs.

    markup (str): an HTML document or fragment, possibly malformed.
    max_chars (int | None): parse at most this many characters; the rest only has
        its tags stripped (entities stay as written, its URLs are not collected),
        since the stdlib parser is slow on tag-dense markup
        (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
    RETURNS (HtmlText): never raises, and takes time linear in the markup's length;
        ``broken`` is set when some of the text came from stripping tags with a
        regular expression (the parser failed, or a construct never ended).
    """
    parser = _Extractor()
    broken = False
    tail = ""
    if max_chars is not None and len(markup) > max_chars:
        markup, tail = markup[:max_chars], markup[max_chars:]
    markup = _LONE_LT.sub(_LT_STAND_IN, markup)
    try:
        for start in range(0, len(markup), _FEED):
            parser.feed(markup[start : start + _FEED])
            if len(parser.rawdata) > _MAX_PENDING:
                broken = True
                if parser._skipping is None:  # inside <script> or <style>: invisible anyway
                    parser.chunks.append(_crude(parser.rawdata))
                parser.reset()  # only the parser's buffer and state; chunks and URLs stay
                parser._skipping = None
        leftover = parser.rawdata
        if tail:
            # Stripped only: html.unescape calls back into Python once per entity.
            if parser._skipping is None:
                parser.chunks.append(strip_tags(leftover + tail))
        elif len(leftover) > _MAX_LEFTOVER and "<" in leftover:
            broken = True
            if parser._skipping is None:
                parser.chunks.append(_crude(leftover))
        else:
            parser.close()
    except AssertionError:
        # CPython 3.11's _markupbase raises AssertionError on a marked section with
        # an unknown keyword ("<![foo[ x": "unknown status keyword 'foo'"). The
        # document is still worth reading, so fall back to a crude tag strip.
        text = _crude(markup) + " " + strip_tags(tail)
        return HtmlText(tidy(text.replace(_LT_STAND_IN, "<")), tuple(parser.urls), broken=True,
                        cut=bool(tail))
    text = "".join(parser.chunks).replace(_LT_STAND_IN, "<")
    return HtmlText(tidy(text), tuple(parser.urls), broken, bool(tail))
