"""Words of scripts written without spaces: one spaCy word in, its tokens out.

Chinese, Japanese, Thai, Lao, Khmer and Myanmar put no spaces between words, so
spaCy's whitespace-and-affix splitting leaves a whole sentence as one "word"
(``您好，我们公司提供优惠的发票服务。`` was one token, learned from nothing).
Here such a word is cut into runs of those scripts, their punctuation, and the
rest; each run becomes its overlapping character bigrams (``我们公司`` -> ``我们``,
``们公``, ``公司``; a one-character run is itself), the rest goes back through the
ordinary word rules.

Why bigrams and not spaCy's own segmenters (jieba for ``zh``, SudachiPy for ``ja``,
PyThaiNLP for ``th``; docs/scripts.md#why-bigrams-not-spacys-chinese-japanese-and-thai-tokenizers
has the measurements): each adds a large install, segments several times slower, and
jieba and PyThaiNLP slow the start-up; pkuseg did not install (it builds from source
against numpy). Each covers one language, none the other scripts, and the filter's
start-up is a product feature. Bigrams need
no dependency, treat every space-less script alike, and are what CJK search
indexes use (Lucene's CJKBigramFilter, Elasticsearch's cjk analyzer): a naive
Bayes filter needs features that recur, and most Chinese words are one or two
characters long. (rspamd cuts words with ICU's dictionary break iterator; PyICU
builds against libicu from source, and was not measured.)

Word pairs (``bi:`` tokens): none with a run's bigrams. Overlapping bigrams
already are pairs of characters; a pair of them is a trigram or 4-gram, more
of the same evidence that ``model.max_pair_discriminators`` exists to stop
being counted twice. So a word holding a run starts with a ``script:<name>``
token (``script:han``, ``script:kana``, ``script:thai`` ...), which, being
namespaced, pairs with neither neighbour (textnb/text/tokenize.py's rule), and
which is itself evidence (what script a user's mail comes in).

Full-width and half-width forms (U+FF00-U+FFEF: ``ＦＲＥＥ``, ``！``, ``ｶﾀｶﾅ``)
are NFKC-normalised, within words that hold them or a run, and only there:
NFKC on all text would also rewrite Latin words (``…`` -> ``...``, ``ﬁ`` -> ``fi``,
``™`` -> ``TM``), which the public corpora's figures were measured without.
Hangul is not a run: Korean is written with spaces between words, and its
spaced words stay words (particles glued to nouns, ``무료로``/``무료를``,
split one noun's evidence; a Korean corpus would tell whether bigrams help).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable, Iterable

# Characters of scripts written without spaces between words, by script (the
# ``script:<name>`` token). Digits and punctuation of these scripts are not in
# runs. Kana includes the prolonged-sound mark (ー) and iteration marks.
_SCRIPTS = {
    "han": "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303c\u3400-\u4dbf\u4e00-\u9fff"
           "\uf900-\ufaff\U00020000-\U0003134f\u3105-\u312f\u31a0-\u31bf",
    "kana": "\u3031-\u3035\u3041-\u3096\u3099-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
            "\U0001b000-\U0001b16f",
    "thai": "\u0e01-\u0e3a\u0e40-\u0e4e",
    "lao": "\u0e81-\u0ecf\u0edc-\u0edf",
    "khmer": "\u1780-\u17d3\u17d7\u17dc\u17dd",
    "myanmar": "\u1000-\u103f\u1050-\u109f\ua9e0-\ua9ff\uaa60-\uaa7f",
}
_RUN_CHARS = "".join(_SCRIPTS.values())
# Punctuation of those scripts: each mark is a token of its own (as spaCy makes
# ``,`` one in Latin text). Full-width ASCII punctuation (，！？) is not listed:
# NFKC has made it ASCII by the time a word is cut.
_PUNCT_CHARS = ("\u3001-\u3004\u3008-\u3020\u302a-\u3030\u303d-\u303f\u30a0\u30fb"
                "\ufe10-\ufe19\ufe30-\ufe6b\u0e4f\u0e5a\u0e5b\u17d4-\u17d6\u17d8-\u17da"
                "\u104a-\u104f")
_FULL_WIDTH = "\uff00-\uffef"

_NEEDS_SEGMENTING = re.compile(f"[{_RUN_CHARS}{_PUNCT_CHARS}{_FULL_WIDTH}]")
# A run, one punctuation mark, or anything else (which has neither).
_PIECES = re.compile(f"([{_RUN_CHARS}]+)|([{_PUNCT_CHARS}])|[^{_RUN_CHARS}{_PUNCT_CHARS}]+")
_SCRIPT_OF = [(name, re.compile(f"[{chars}]")) for name, chars in _SCRIPTS.items()]


def needs_segmenting(word: str) -> bool:
    """Whether ``word`` holds a run of a space-less script, its punctuation, or a
    full-width form. Cheap on the common case: an ASCII word is never searched."""
    return not word.isascii() and _NEEDS_SEGMENTING.search(word) is not None


def script_tokens(word: str) -> list[str]:
    """``script:<name>`` for each space-less script in ``word``, in a fixed order."""
    return [f"script:{name}" for name, chars in _SCRIPT_OF if chars.search(word)]


def run_tokens(run: str) -> list[str]:
    """A run's overlapping character bigrams, or the run itself when it is one
    character. Interned: the same bigram recurs in thousands of cached chunks,
    and one string object serves them all."""
    if len(run) < 2:
        return [sys.intern(run)]
    return list(map(sys.intern, map(str.__add__, run[:-1], run[1:])))


def segment(word: str, map_other: Callable[[str], Iterable[str]]) -> tuple[str, ...]:
    """The tokens of one whitespace-free ``word`` that ``needs_segmenting``.

    The word is NFKC-normalised, then cut into runs, punctuation marks and the
    rest. Runs give their bigrams (``run_tokens``); a punctuation mark and each
    rest piece give ``map_other(piece)``, the ordinary word rules (the caller's:
    spaCy's affix splitting, lower-casing, number shapes, URLs). When the word
    has a run, its ``script:`` tokens come first.
    """
    word = unicodedata.normalize("NFKC", word)
    out: list[str] = []
    for match in _PIECES.finditer(word):
        run = match.group(1)
        if run is not None:
            out.extend(run_tokens(run))
        else:
            out.extend(map_other(match.group()))
    return (*script_tokens(word), *out)
