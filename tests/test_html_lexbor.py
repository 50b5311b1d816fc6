"""The Lexbor renderer (textnb.mail.html_lexbor) beside the stdlib one (textnb.mail.html_text):
the same rendering rules on hand-written HTML, hostile markup in bounded time, and the
[mail] html_renderer setting saved with a model, so an older model keeps the stdlib one."""

from __future__ import annotations

import json
import time
import zipfile
from dataclasses import replace

import numpy as np
import pytest
from conftest import SAMPLE_INDEX
from hostile_cases import CASES, html_message

from textnb.config import FilterConfig, load_config
from textnb.errors import ConfigError
from textnb.mail.html_lexbor import MAX_TREE_TAGS, lexbor_to_text
from textnb.mail.html_text import html_to_text
from textnb.mail.parse import MailLimits, parse_message
from textnb.mail.sources import iter_index
from textnb.modelfile import dump, store
from textnb.modelfile.retrain import fit, forget_messages
from textnb.spamfilter import SpamFilter

RENDERERS = pytest.mark.parametrize("render", [html_to_text, lexbor_to_text],
                                    ids=["stdlib", "lexbor"])


# -- the rules, both renderers ------------------------------------------------------

@RENDERERS
@pytest.mark.parametrize("markup, text", [
    ("<p>V<b></b>iagra and Via<!-- hidden -->gra</p>", "Viagra and Viagra"),
    ("<p>c<span>he</span><font color=red>ap</font></p>", "cheap"),
    ("<table><tr><td>Buy</td><td>now</td></tr></table>", "Buy\nnow"),
    ("one<br>two<div>three</div>four", "one\ntwo\nthree\nfour"),
    ("<ul><li>a<li>b</ul><h1>c</h1>", "a\nb\nc"),
    ("<p>shown<script>var hidden = 1;</script> <style>p {}</style>too</p>", "shown too"),
    ("<p>caf&eacute; &amp; cr&#232;me &nbsp; &lt;b&gt;</p>", "café & crème <b>"),
    ("<p>  many    spaces\t\tcollapse  </p>", "many spaces collapse"),
    ("", ""),
])
def test_renders_what_a_browser_shows(render, markup, text):
    assert render(markup).text == text


@RENDERERS
def test_urls_in_document_order_decoded_and_stripped(render):
    markup = ('<a href=" http://a.example/?x=1&amp;y=2 ">one</a><img src="i.png">'
              '<a href="">empty</a><img src="b.png" href="c">')
    assert render(markup).urls == ("http://a.example/?x=1&y=2", "i.png", "b.png", "c")


@RENDERERS
def test_past_max_chars_tags_are_stripped_and_urls_not_collected(render):
    markup = "<p>cheap</p>" + "<p>meds <a href=http://x/>here</a></p>"
    rendered = render(markup, max_chars=12)
    assert rendered.cut and rendered.urls == ()
    assert rendered.text.split() == ["cheap", "meds", "here"]
    assert not render(markup, max_chars=len(markup)).cut


@RENDERERS
@pytest.mark.parametrize("markup", ["<", "<<<a<a<", "<!--", "<![foo[ x", "&#xd800; &#0;",
                                    "</p></html>text", "<svg><p>x", "<frameset>", "\x00<p>"])
def test_broken_markup_never_raises(render, markup):
    assert isinstance(render(markup).text, str)


# -- where Lexbor differs, on purpose -------------------------------------------------

def test_lexbor_drops_fallback_content_a_browser_does_not_show():
    markup = ("<p>page</p><iframe src=http://ads/><script src=x></script>no frames</iframe>"
              "<noframes><p>old browser</p></noframes><noembed>no embed</noembed>")
    rendered = lexbor_to_text(markup)
    assert rendered.text == "page"
    assert rendered.urls == ("http://ads/",)


def test_lexbor_hides_a_comment_that_never_ends():
    assert lexbor_to_text("visible <!-- hidden to the end").text == "visible"


def test_more_tags_than_the_tree_budget_go_to_the_stdlib_renderer():
    markup = "<ul>" + "<li>x" * 50
    assert lexbor_to_text(markup, max_tags=10) == html_to_text(markup)
    assert lexbor_to_text(markup, max_tags=51).text == "\n".join(["x"] * 50)


# -- hostile markup -------------------------------------------------------------------

LEXBOR = MailLimits(html_renderer="lexbor")
HTML_CASES = [case for case in CASES if case.name.startswith("html-")]


@pytest.mark.parametrize("case", HTML_CASES, ids=lambda case: case.name)
def test_hostile_html_cases_stay_within_their_bounds(case):
    raw = case.build()
    start = time.process_time()
    parsed = parse_message(raw, LEXBOR)
    assert time.process_time() - start < case.seconds
    words = " ".join(part.text for part in parsed.parts).split()
    assert any(w.startswith("cheap") or w == "visible" for w in words), case.name
    if case.name == "html-10MB-of-tags":
        assert "too-much-html" in parsed.defects


@pytest.mark.parametrize("case", HTML_CASES, ids=lambda case: case.name)
def test_hostile_html_cases_name_their_defects_with_the_stdlib_renderer(case):
    parsed = parse_message(case.build(), MailLimits(html_renderer="stdlib"))
    for defect in case.controls + case.stdlib_controls:
        assert defect in parsed.defects, (case.name, defect)


def _open_elements(n: int) -> str:
    # The worst shape measured (html_lexbor's docstring): unclosed formatting elements,
    # each distinct, then text in a table, which makes the tree builder scan them all.
    return "".join(f"<i id={i}>" for i in range(n)) + "<table>" + "x" * n


def test_tree_budget_is_shared_by_a_messages_parts():
    # 30 parts, each just under the budget: built one by one they would cost about
    # 30 x 0.5 s; only the first is built, the rest go to the linear renderer.
    part = (b"Content-Type: text/html\n\ncheap "
            + _open_elements(MAX_TREE_TAGS - 100).encode())
    raw = (b'Content-Type: multipart/mixed; boundary="B"\n\n'
           + b"".join(b"--B\n" + part + b"\n" for _ in range(30)) + b"--B--\n")
    start = time.process_time()
    parsed = parse_message(raw, LEXBOR)
    seconds = time.process_time() - start
    assert len(parsed.parts) == 30 and all("cheap" in p.text for p in parsed.parts)
    assert seconds < 10, seconds  # measured: 0.74 s (each part built: about 14 s)


# -- the setting, saved with the model --------------------------------------------------

def test_new_config_default_and_bad_value_named_with_the_fix():
    assert FilterConfig().mail.html_renderer == "lexbor"
    assert load_config(overrides={"mail.html_renderer": "stdlib"}).mail.html_renderer == "stdlib"
    with pytest.raises(ConfigError, match=r"mail\.html_renderer='lxml' is not allowed; use "
                                          r"'lexbor' .* or 'stdlib'"):
        load_config(overrides={"mail.html_renderer": "lxml"})


def test_the_renderer_decides_the_parts_text():
    raw = html_message(b"<p>cheap</p><iframe>fallback words</iframe>")
    stdlib = parse_message(raw, MailLimits(html_renderer="stdlib"))
    lexbor = parse_message(raw, LEXBOR)
    assert stdlib.parts[0].text == "cheap\nfallback words"
    assert lexbor.parts[0].text == "cheap"


MESSAGES = list(iter_index(SAMPLE_INDEX))
HTML_MESSAGES = [m for m in MESSAGES if b"text/html" in m.raw.lower()]


def _without_the_key(path):
    """Rewrite a model file as a model saved before [mail] html_renderer existed."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(members["textnb-model.json"])
    del meta["config"]["mail"]["html_renderer"]
    members["textnb-model.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)


def test_a_model_saved_before_the_setting_keeps_the_stdlib_renderer(tmp_path):
    config = replace(FilterConfig(), mail=MailLimits(html_renderer="stdlib"))
    spam_filter = SpamFilter(config)
    fit(spam_filter, MESSAGES)
    path = store.save(spam_filter, tmp_path / "old.tnb")
    _without_the_key(path)
    loaded = store.load(path)
    assert loaded.mail_limits.html_renderer == "stdlib"
    # The ledger's token hashes still match: forgetting HTML messages finds them.
    assert forget_messages(loaded, HTML_MESSAGES[:3])["not_found"] == 0
    # A text dump without the setting line reads the same way.
    lines = [line for line in dump.dumps(spam_filter).split(b"\n")
             if not line.startswith(b"setting\tmail.html_renderer\t")]
    assert dump.loads(b"\n".join(lines)).mail_limits.html_renderer == "stdlib"


def test_a_lexbor_model_saves_and_loads_with_identical_scores(tmp_path):
    spam_filter = SpamFilter(replace(FilterConfig(), mail=LEXBOR))
    fit(spam_filter, MESSAGES)
    loaded = store.load(store.save(spam_filter, tmp_path / "lexbor.tnb"))
    assert loaded.mail_limits.html_renderer == "lexbor"
    raws = [m.raw for m in HTML_MESSAGES]
    assert len(raws) >= 10
    np.testing.assert_array_equal(loaded.log_odds(raws), spam_filter.log_odds(raws))
    from_dump = dump.loads(dump.dumps(spam_filter))
    assert from_dump.mail_limits.html_renderer == "lexbor"
    np.testing.assert_array_equal(from_dump.log_odds(raws), spam_filter.log_odds(raws))
    assert forget_messages(loaded, HTML_MESSAGES[:3])["not_found"] == 0
