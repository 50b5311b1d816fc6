"""HTML -> the text a reader sees and the URLs, with Lexbor (selectolax): textnb.mail.html_text's
rules, with the parsing and the walk done in C.

The stdlib renderer (textnb.mail.html_text) spends about half of ``parse_message``'s CPU
on SpamAssassin in a Python callback per tag (docs/html-to-text.md#speed); here Lexbor
builds the HTML5 tree in C and selectolax's C calls drop the invisible elements, find
the URLs and the block elements and join the text. The one Python loop is over block
elements (two C calls each, to put a line break on either side of it): a line break
between text nodes can't be asked of ``text(separator=...)`` without also splitting a
word at an inline tag (``V<b></b>iagra``).

Lexbor is a browser's parser, so the text is what a browser shows where the two differ
(docs/html-to-text.md has the measured differences): an unclosed comment hides the rest
of the document, ``<iframe>``/``<noframes>``/``<noembed>`` fallback content is not
shown, text after ``</html>`` moves into the body. It never gives up on markup, so
``broken`` is only set when a document went to the stdlib renderer (below) and that
renderer gave up.

Building an HTML5 tree is not linear in the worst case: markup that keeps many elements
open (``<ul><li>`` repeated, unclosed ``<font>`` with distinct attributes, thousands of
``<option>``) makes each new tag scan the open elements, so the worst crafted shapes
cost time that grows with the square of the tag count, far beyond what real mail needs
(docs/html-to-text.md#how-the-lexbor-renderer-works). So the tree is built for at most
``max_tags`` tags; a longer document goes to the stdlib renderer, which is linear.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from .html_text import BLOCK_TAGS, HtmlText, html_to_text, strip_tags, tidy

__all__ = ["MAX_TREE_TAGS", "lexbor_to_text"]

# Elements whose content a browser does not render. script and style as in
# textnb.mail.html_text; the other three hold fallback content that a browser shows only when
# it lacks the feature, and HTML5 reads it as raw text: kept, "<script src=...>" inside a
# SpamAssassin newsletter's <iframe> became words (43 of its 961 HTML parts).
_INVISIBLE = ["script", "style", "iframe", "noembed", "noframes"]

_BLOCK_SELECTOR = ",".join(sorted(BLOCK_TAGS))
# An element with both attributes matches both halves of "[href],[src]" and came back
# twice; each element once, its two URLs read in attribute order.
_URL_SELECTOR = "[href], [src]:not([href])"
_URL_ATTRS = ("href", "src")

# Tags ('<' characters) the tree is built for: several times SpamAssassin's largest HTML
# part, and a bound on the quadratic worst case of crafted markup
# (docs/html-to-text.md#how-the-lexbor-renderer-works). mail.parse_message shares this
# budget among a message's HTML parts, so a message costs at most about that much here.
MAX_TREE_TAGS = 10_000


def lexbor_to_text(markup: str, max_chars: int | None = None,
                   max_tags: int = MAX_TREE_TAGS) -> HtmlText:
    """Render HTML to its visible text and collect its link URLs, in C.

    markup (str): an HTML document or fragment, possibly malformed.
    max_chars (int | None): read at most this many characters as HTML; the rest only has
        its tags stripped (entities stay as written, its URLs are not collected), as
        textnb.mail.html_text.html_to_text does.
    max_tags (int): build the tree only when the markup read has at most this many '<';
        otherwise render with textnb.mail.html_text.html_to_text (linear time).
    RETURNS (HtmlText): never raises; time linear in the markup's length.
    """
    tail = ""
    if max_chars is not None and len(markup) > max_chars:
        markup, tail = markup[:max_chars], markup[max_chars:]
    if markup.count("<") > max_tags:
        return html_to_text(markup + tail, max_chars)
    tree = LexborHTMLParser(markup)
    urls = [value.strip() for node in tree.css(_URL_SELECTOR)
            for name, value in node.attributes.items()
            if name in _URL_ATTRS and value and value.strip()]
    tree.strip_tags(_INVISIBLE, recursive=True)
    for node in tree.css(_BLOCK_SELECTOR):
        node.insert_before("\n")
        node.insert_after("\n")
    # Joined with nothing between text nodes: an inline tag's neighbours stay one word.
    text = tree.text() + strip_tags(tail)
    return HtmlText(tidy(text), tuple(urls), False, bool(tail))
