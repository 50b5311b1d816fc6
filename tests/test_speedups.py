"""textnb._c._speedups (the per-token loops in C) gives exactly what its Python twins in
textnb._c.speedups give, and textnb runs the same without it."""

import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textnb._c import speedups
from textnb.config import TokenizerConfig
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.models import evidence
from textnb.spamfilter import SpamFilter
from textnb.text.tokenize import EmailTokenizer, _chunk_entry

try:
    from textnb._c import _speedups
except ImportError:
    _speedups = None

needs_c = pytest.mark.skipif(
    _speedups is None, reason="textnb._c._speedups was not built (no C compiler at install): "
    "textnb runs the Python loops, which the other tests cover")

# Words of every width CPython stores a str in (1, 2 and 4 bytes a character), so that a
# pair joins any two widths.
WORDS = ["free", "money", "café", "naïve", "привет", "日本語", "€5", "😀smile", "a", "x" * 40]


def _entries(rng: np.random.Generator, n: int) -> list[tuple]:
    """Random chunk entries as the tokenizer caches them: () or a ``_chunk_entry``."""
    entries = []
    for _ in range(n):
        words = []
        for _ in range(int(rng.integers(0, 4))):
            word = WORDS[int(rng.integers(len(WORDS)))]
            if rng.random() < 0.2:  # a namespaced token: never paired
                word = "num:" + word
            words.append((word,) if rng.random() < 0.8 else (word, "email:addr"))
        entries.append(_chunk_entry(words))
    return entries


@needs_c
def test_join_chunks_in_c_equals_python():
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 5, 50, 2000):
        entries = _entries(rng, n)
        expected = speedups.join_chunks_python(entries)
        got = _speedups.join_chunks(entries)
        assert got == expected
        assert all(type(token) is str for token in got)


@needs_c
def test_count_words_in_c_equals_python():
    rng = np.random.default_rng(17)
    for n in (0, 1, 50, 2000):
        entries = _entries(rng, n)
        assert _speedups.count_words(entries) == speedups.count_words_python(entries)
    assert speedups.count_words_python(["free", (), _chunk_entry([("a",), ("b", "c")])]) == 4
    with pytest.raises(TypeError, match="7-tuple"):
        _speedups.count_words([("free",)])


def test_a_one_token_chunk_is_cached_as_its_token():
    assert _chunk_entry([("free",)]) == "free"
    assert _chunk_entry([]) == ()
    assert isinstance(_chunk_entry([("free", "email:addr")]), tuple)
    assert isinstance(_chunk_entry([("free",), ("money",)]), tuple)


@needs_c
def test_join_chunks_pairs_every_string_width():
    for left in WORDS:
        for right in WORDS:
            expected = [left, right, f"bi:{left} {right}"]  # a pair follows its second word
            as_tuple = (left,), (), left, True, left, True, 1
            for entries in ([_chunk_entry([(left,)]), (), _chunk_entry([(right,)])],
                            [as_tuple, _chunk_entry([(right,)])]):
                assert speedups.join_chunks_python(entries) == expected
                assert _speedups.join_chunks(entries) == expected


@needs_c
def test_join_chunks_rejects_what_is_not_an_entry():
    with pytest.raises(TypeError, match="list of chunk entries"):
        _speedups.join_chunks(("not", "a list"))
    with pytest.raises(TypeError, match="7-tuple"):
        _speedups.join_chunks([("free",)])
    with pytest.raises(TypeError, match="must be str"):
        _speedups.join_chunks([((1,), (), 1, True, 1, True, 1)])
    with pytest.raises(TypeError, match="must be a tuple"):
        _speedups.join_chunks([(["free"], (), "free", True, "free", True, 1)])


@needs_c
def test_number_tokens_in_c_equals_python():
    rng = np.random.default_rng(11)
    vocabulary = WORDS + [f"bi:{a} {b}" for a in WORDS for b in WORDS] + ["", "subject:free"]
    cases = [[], [[]], [[], ["free"], []], [["free", "free", "money"], ["money", "café"]]]
    for n in (10, 500):
        cases.append([[vocabulary[int(i)] for i in rng.integers(len(vocabulary), size=int(k))]
                      for k in rng.integers(0, 60, size=n)])
    word = WORDS[0]
    assert word.encode().decode() is not word  # the copies below are other objects
    for lists in cases:
        # Equal tokens that are not the same object (as the tokenizer makes word pairs).
        lists = [[token.encode().decode() if j % 2 else token for j, token in enumerate(tokens)]
                 for tokens in lists]
        numbers, distinct = speedups.number_tokens_python(lists)
        out = np.empty(numbers.size, dtype=np.int64)
        assert _speedups.number_tokens(lists, out) == distinct
        assert np.array_equal(out, numbers)


@needs_c
def test_number_tokens_checks_its_buffer():
    lists = [["free", "money"], ["free"]]
    with pytest.raises(TypeError, match="int64 buffer"):
        _speedups.number_tokens(lists, np.empty(3, dtype=np.float64))
    with pytest.raises(TypeError, match="int64 buffer"):
        _speedups.number_tokens(lists, np.empty(3, dtype=np.int32))
    with pytest.raises(ValueError, match="more tokens than out holds"):
        _speedups.number_tokens(lists, np.empty(2, dtype=np.int64))
    with pytest.raises(ValueError, match="more items than tokens"):
        _speedups.number_tokens(lists, np.empty(4, dtype=np.int64))
    with pytest.raises(TypeError, match="lists of tokens"):
        _speedups.number_tokens([("free",)], np.empty(1, dtype=np.int64))
    with pytest.raises(BufferError, match="not writable"):
        _speedups.number_tokens(lists, b"\0" * 24)


@needs_c
def test_numbering_a_batch_of_many_distinct_tokens():
    """Past the table's first size (4,096 slots, grown at 2/3 full) many times, with
    equal tokens that are other objects: the numbers are the Python twin's."""
    lists = [[f"t{i % 50_000}".encode().decode() for i in range(j, j + 2_000)]
             for j in range(0, 120_000, 2_000)]
    numbers, distinct = speedups.number_tokens_python(lists)
    out = np.empty(numbers.size, dtype=np.int64)
    assert _speedups.number_tokens(lists, out) == distinct and len(distinct) == 50_000
    assert np.array_equal(out, numbers)
    got = speedups.count_messages(lists)
    expected = speedups.count_messages_python(lists)
    assert got[0] == expected[0] and np.array_equal(got[1], expected[1])
    assert _by_list(*got[1:]) == _by_list(*expected[1:])


# Every character str.split() splits at, and some it does not (zero-width space, NUL).
SPACES = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
NOT_SPACES = "\u200b\x00\ufeff"


def _both_caches(entries: dict) -> tuple:
    built, python = _speedups.ChunkCache(), speedups.ChunkCachePython()
    built.update(entries)
    python.update(entries)
    return built, python


@needs_c
def test_the_chunk_cache_in_c_equals_python():
    """Texts of every str width, every Unicode space and cut chunks: the same values,
    positions and new chunks; a key of ASCII found inside a wider text."""
    rng = np.random.default_rng(13)
    alphabet = WORDS + list(SPACES) + list(NOT_SPACES) + [" ", "\n", "x" * 30, "free"]
    entries = {"free": ("free-entry",), "café": (), "日本語": ("a", "b"), "x" * 25: ("cut",),
               "a": "a", "money": "money"}
    texts = ["", " ", "free", " free  café\t日本語\n", "\u3000free\u3000", "x" * 70,
             "日本 free 😀 money"]
    for _ in range(300):
        picks = rng.integers(len(alphabet), size=int(rng.integers(0, 40)))
        texts.append("".join(alphabet[int(i)] for i in picks))
    built, python = _both_caches(entries)
    for text in texts:
        for max_chunk in (1, 25, 2000):
            expected = python.lookup(text, max_chunk)
            got = built.lookup(text, max_chunk)
            assert got == expected, (text, max_chunk)
            assert all(type(chunk) is str for chunk in got[2])
    assert built.lookup("日本 free", 2000)[0] == [None, ("free-entry",)]


@needs_c
def test_the_chunk_cache_splits_where_str_split_does():
    text = "a" + "a".join(SPACES + NOT_SPACES) + "a"
    for cache in _both_caches({}):
        values, positions, chunks = cache.lookup(text, 2000)
        assert chunks == text.split()
        assert values == [None] * len(chunks) and positions == list(range(len(chunks)))
        with pytest.raises(ValueError, match="at least 1"):
            cache.lookup("free", 0)
    with pytest.raises(TypeError):
        _speedups.ChunkCache().lookup(b"free", 10)


@needs_c
def test_the_chunk_cache_grows_replaces_clears_and_copies_empty():
    import copy
    import pickle

    built, python = _both_caches({})
    words = [f"w{i}é" if i % 3 else f"w{i}" for i in range(5000)]  # grown many times
    for cache in (built, python):
        cache.update({w: (w,) for w in words})
        cache.update({"w1é": "again"})  # a chunk's value replaced, not added
        assert len(cache) == 5000
        values, positions, _ = cache.lookup(" ".join(words + ["new"]), 2000)
        assert values[:3] == [("w0",), "again", ("w2é",)] and positions == [5000]
    assert built.lookup(" ".join(words), 2000) == python.lookup(" ".join(words), 2000)
    for cache in (built, python):  # a copy (the scorer copies its model) starts empty
        for clone in (copy.deepcopy(cache), pickle.loads(pickle.dumps(cache)), copy.copy(cache)):
            assert type(clone) is type(cache) and len(clone) == 0
    assert sys.getsizeof(built) > 5000 * 24  # the table: 24 bytes a slot
    built.clear()
    assert len(built) == 0 and built.lookup("w0", 10)[0] == [None]
    # A tokenizer keeps a cache per namespace (each header field tokenised as text): a
    # cache of a few chunks stays small (the fuzzer's memory grew with 1,024 slots each).
    built.update({"one": ("one",)})
    assert sys.getsizeof(built) < 1024
    built.update({"w0": ("w0",)})
    assert built.lookup("w0", 10)[0] == [("w0",)]
    with pytest.raises(TypeError, match="keys must be str"):
        built.update({b"w": ("w",)})
    with pytest.raises(ValueError, match="cannot be None"):
        built.update({"w": None})
    with pytest.raises(TypeError, match="no arguments"):
        _speedups.ChunkCache(1)


def _by_list(distinct: np.ndarray, columns: np.ndarray, counts: np.ndarray) -> list[list]:
    """Each list's (number, count) entries, sorted: their order within a list is free."""
    ends = np.cumsum(distinct)
    return [sorted(zip(columns[end - k:end].tolist(), counts[end - k:end].tolist()))
            for k, end in zip(distinct.tolist(), ends.tolist())]


def _random_lists(rng: np.random.Generator, n: int) -> list[list[str]]:
    vocabulary = WORDS + [f"bi:{a} {b}" for a in WORDS for b in WORDS]
    return [[vocabulary[int(i)] for i in rng.integers(len(vocabulary), size=int(k))]
            for k in rng.integers(0, 80, size=n)]


@needs_c
def test_count_messages_in_c_equals_python(monkeypatch):
    # The C loop, even under TEXTNB_PURE_PYTHON=1 (which would make the call below run
    # the Python twin, whose order within a list the last check does not hold to).
    monkeypatch.setattr(speedups, "_speedups", _speedups)
    rng = np.random.default_rng(5)
    cases = [[], [[]], [[], ["free"], [], ["free", "free"]], _random_lists(rng, 3),
             _random_lists(rng, 700)]
    for lists in cases:
        expected = speedups.count_messages_python(lists)
        got = speedups.count_messages(lists)
        assert got[0] == expected[0]
        assert np.array_equal(got[1], expected[1])
        assert _by_list(*got[1:]) == _by_list(*expected[1:])
        # In C, a list's entries come in order of first sight in it.
        ends = np.cumsum(got[1])
        for tokens, k, end in zip(lists, got[1].tolist(), ends.tolist()):
            numbers = [got[0].index(t) for t in dict.fromkeys(tokens)]
            assert got[2][end - k:end].tolist() == numbers


def test_count_messages_by_hand():
    for count_messages in (speedups.count_messages, speedups.count_messages_python):
        tokens, distinct, columns, counts = count_messages(
            [["a", "b", "a"], [], ["c", "a", "c", "c"]])
        assert tokens == ["a", "b", "c"]
        assert distinct.tolist() == [2, 0, 2]
        assert _by_list(distinct, columns, counts) == [[(0, 2), (1, 1)], [], [(0, 1), (2, 3)]]


@needs_c
def test_count_messages_checks_its_arguments():
    def call(lists, distinct=1, columns=3, counts=3, dtype=np.int64):
        return _speedups.count_messages(lists, np.empty(distinct, dtype=dtype),
                                        np.empty(columns, dtype=np.int64),
                                        np.empty(counts, dtype=np.int64))
    assert call([["a", "b", "a"]]) == (["a", "b"], 2)
    with pytest.raises(TypeError, match="distinct must be an int64 buffer"):
        call([["a"]], dtype=np.float64)
    with pytest.raises(ValueError, match="one item a list"):
        call([["a"]], distinct=2)
    with pytest.raises(ValueError, match="more entries than columns holds"):
        call([["a", "b", "c"]], counts=2)
    with pytest.raises(TypeError, match="tokens must be str, not int"):
        call([["a", 1]])
    with pytest.raises(TypeError, match="tokens must be str"):
        _speedups.number_tokens([["a", b"a"]], np.empty(2, dtype=np.int64))

    class Token(str):
        pass
    with pytest.raises(TypeError, match="not Token"):
        call([[Token("a")]])


def test_counted_runs_hashes_equal_runs_hashes():
    from textnb.models.ledger import counted_runs_hashes, runs_hashes, token_hashes

    lists = _random_lists(np.random.default_rng(3), 200) + [[]]
    tokens, distinct, columns, counts = speedups.count_messages(lists)
    numbers, _ = speedups.number_tokens(lists)
    lengths = [len(t) for t in lists]
    hashes = token_hashes(tokens)
    assert (counted_runs_hashes(hashes, columns, counts, distinct, lengths)
            == runs_hashes(hashes, numbers, lengths))


def _train_and_score(sample_index: Path, tmp_path: Path, name: str) -> tuple[dict, list]:
    spam_filter = SpamFilter().fit(iter_index(sample_index))
    path = tmp_path / f"{name}.tnb"
    store.save(spam_filter, path)
    # The members, not the file's bytes: the ZIP stamps each member with the time it was
    # written (two-second steps), so two saves of one model may differ there.
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    tokens = [spam_filter.tokens(m.raw) for m in iter_index(sample_index)]
    return members, tokens, spam_filter.log_odds(m.raw for m in iter_index(sample_index))


def test_c_and_python_loops_give_the_same_model_tokens_and_scores(sample_index, tmp_path,
                                                                   monkeypatch):
    """The whole chain: tokens, the model file member by member, the scores, with the loops
    textnb was built with and with the Python ones (TEXTNB_PURE_PYTHON's effect)."""
    built = _train_and_score(sample_index, tmp_path, "built")
    monkeypatch.setattr(speedups, "_speedups", None)
    assert speedups.implementation() == "Python"
    python = _train_and_score(sample_index, tmp_path, "python")
    assert built[0] == python[0]
    assert built[1] == python[1]
    assert np.array_equal(built[2], python[2])


def test_pure_python_switch(monkeypatch):
    import importlib

    monkeypatch.setenv("TEXTNB_PURE_PYTHON", "1")
    try:
        assert importlib.reload(speedups).implementation() == "Python"
    finally:
        monkeypatch.delenv("TEXTNB_PURE_PYTHON")
        importlib.reload(speedups)
    assert speedups.implementation() == ("C" if _speedups is not None else "Python")


# Text with what the loops treat specially: every kind of space, namespace marks, the
# affixes the tokenizer's rules split, URLs, and characters of every str width.
_PIECES = list(" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000:.,!?()<>@/=&$€5éж日😀") + [
    "ab", "free", "http://x.example/", "a@b.example"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@needs_c
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=4))
def test_the_tokenizer_gives_the_same_tokens_with_either_loops(texts):
    """A tokenizer on the C loops and one on the Python loops, fed the same texts in the
    same order (so their caches hold the same), give the same tokens, text by text."""
    built, python = EmailTokenizer(TokenizerConfig()), EmailTokenizer(TokenizerConfig())
    for text in texts + texts:  # the second time from the caches
        for namespace in ("", "subject:"):
            expected_out = _with_python_loops(python.text_tokens, text, namespace)
            assert built.text_tokens(text, namespace) == expected_out
            limited = _with_python_loops(python.text_tokens, text, namespace, limit=3)
            assert built.text_tokens(text, namespace, limit=3) == limited


_CHUNK_PIECES = list("aZé1.@:/=&-_中😀") + list("[(\"'<{*`|~") + list("])\"'>},;:.!?*`|") + [
    "http://", "HTTPS://", "www.", "ftp://", "free", "a@b.example"]
_CHUNK = st.lists(st.sampled_from(_CHUNK_PIECES), min_size=1, max_size=12).map("".join)


def _mapper():
    """A word mapping as the tokenizer's: the word lower-cased, namespaced words and
    words of punctuation mapping to tokens with ':' or to none, stored in ``words``."""
    def new_word(text, words):
        if not any(c.isalnum() for c in text):
            tokens = ()
        elif "@" in text:
            tokens = ("email:addr", "email:domain:" + text.rpartition("@")[2])
        else:
            tokens = (text.lower(),)
        words[text] = tokens
        return tokens
    return new_word


@needs_c
@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(_CHUNK, min_size=1, max_size=20, unique=True), bigrams=st.booleans(),
       plain=st.sampled_from([None, speedups.PlainWords("", True, 2, 5, 10**6),
                              speedups.PlainWords("subject:", False, 1, 3, 10**6),
                              speedups.PlainWords("to:", True, 2, 40, 2)]))
def test_map_chunks_in_c_equals_python(chunks, bigrams, plain):
    """The same values, the same chunks left to spaCy, the same words asked for (and,
    with ``plain``, the same words of ASCII letters mapped without asking, up to the
    cache's limit)."""
    from textnb.text.tokenize import _CHUNK_RULES

    new_word = _mapper()
    python_words, c_words = {"free": ("free",)}, {"free": ("free",)}
    python_asked, c_asked = [], []

    def asking(asked, words):
        return lambda t: (asked.append(t), new_word(t, words))[1]

    expected = speedups.map_chunks_python(chunks, python_words,
                                          asking(python_asked, python_words), bigrams,
                                          _CHUNK_RULES, plain)
    got = _speedups.map_chunks(chunks, c_words, asking(c_asked, c_words), bigrams,
                               *_CHUNK_RULES[:4], plain)
    assert got == expected
    assert c_words == python_words
    assert c_asked == python_asked


@needs_c
def test_map_chunks_by_hand():
    from textnb.text.tokenize import _CHUNK_RULES

    words, new_word = {}, _mapper()
    values, left = _speedups.map_chunks(
        ["free", '("free",)', "x/y", "<bob@example.org>", "http://x.example/a.", ""], words,
        lambda text: new_word(text, words), True, *_CHUNK_RULES[:4])
    assert left == ["x/y"]  # an infix: spaCy's
    assert values["free"] == "free" and values[""] == ()
    assert values['("free",)'] == "free"  # the marks map to nothing
    assert values["<bob@example.org>"][0] == ("email:addr", "email:domain:example.org")
    assert values["http://x.example/a."] == "http://x.example/a."  # kept whole
    python_words = {}
    assert (values, left) == speedups.map_chunks_python(
        list(values) + left, python_words, lambda text: new_word(text, python_words), True,
        _CHUNK_RULES)
    assert words == python_words  # the same words asked for, the empty chunk's too


@needs_c
def test_map_chunks_checks_its_arguments_and_passes_errors_on():
    from textnb.text.tokenize import _CHUNK_RULES

    rules = _CHUNK_RULES[:4]
    with pytest.raises(TypeError, match="list of str"):
        _speedups.map_chunks(["a", 1], {}, lambda t: (t,), True, *rules)
    with pytest.raises(TypeError, match="must be a tuple"):
        _speedups.map_chunks(["a"], {}, lambda t: [t], True, *rules)
    with pytest.raises(TypeError, match="ASCII"):
        _speedups.map_chunks(["a"], {}, lambda t: (t,), True, "é", *rules[1:])
    with pytest.raises(ValueError, match="namespace must be ASCII"):
        _speedups.map_chunks(["a"], {}, lambda t: (t,), True, *rules, ("é:", True, 1, 9, 9))
    with pytest.raises(TypeError, match="plain words"):
        _speedups.map_chunks(["a"], {}, lambda t: (t,), True, *rules, ("x:", True, 1))

    def broken(text):
        raise ValueError(f"no tokens for {text}")

    with pytest.raises(ValueError, match=r"no tokens for \("):
        _speedups.map_chunks(["(b)"], {}, broken, False, *rules)
    with pytest.raises(ZeroDivisionError):
        _speedups.map_chunks(["(a@b.example)"], {}, lambda t: (t,), False, *rules[:3],
                             lambda text: 1 / 0)


def _with_python_loops(function, *args, **kwargs):
    saved, speedups._speedups = speedups._speedups, None
    try:
        return function(*args, **kwargs)
    finally:
        speedups._speedups = saved


@needs_c
def test_the_hash_index_finds_the_first_column_of_each_hash():
    """Columns added batch by batch (the table grown many times): each hash finds the
    first column that had it, a repeat is reported as taken, an unknown hash gives -1."""
    rng = np.random.default_rng(23)
    index, first = speedups.HashIndex(), {}
    for _ in range(60):
        hashes = rng.integers(-2**63, 2**63 - 1, size=int(rng.integers(0, 400)), dtype=np.int64)
        hashes[::7] = rng.integers(0, 50, size=hashes[::7].size)  # repeats, across batches too
        start = len(index)
        taken = index.add(hashes)
        expected = []
        for column, h in enumerate(hashes.tolist(), start=start):
            expected.append(h in first)
            first.setdefault(h, column)
        assert taken.tolist() == expected
    queries = np.array(list(first) + [12345678901, -5], dtype=np.int64)
    assert index.find(queries).tolist() == list(first.values()) + [-1, -1]
    assert index.repeats(np.array([3, 9, 3], dtype=np.int64))
    assert not index.repeats(np.array([3, 9, 4], dtype=np.int64))
    assert speedups.HashIndex().find(np.array([1], dtype=np.int64)).tolist() == [-1]
    # A vocabulary holding one is copied and pickled (the scorer copies its model).
    import copy
    import pickle

    for clone in (copy.deepcopy(index), pickle.loads(pickle.dumps(index))):
        assert clone.find(queries).tolist() == index.find(queries).tolist()


@needs_c
def test_the_hash_index_functions_check_their_arguments():
    keys = np.arange(4, dtype=np.int64)
    with pytest.raises(TypeError, match="power of two"):
        _speedups.index_find(np.zeros(6, np.int32), keys, keys, np.empty(4, np.int64))
    with pytest.raises(TypeError, match="power of two"):
        _speedups.index_find(np.zeros(8, np.int64), keys, keys, np.empty(4, np.int64))
    with pytest.raises(ValueError, match="as long as hashes"):
        _speedups.index_find(np.zeros(8, np.int32), keys, keys, np.empty(3, np.int64))
    with pytest.raises(ValueError, match="range"):
        _speedups.index_insert(np.zeros(8, np.int32), keys, 2, 6, np.empty(4, np.uint8))
    with pytest.raises(ValueError, match="full"):
        _speedups.index_insert(np.zeros(2, np.int32), keys, 0, 4, np.empty(4, np.uint8))
    slots = np.full(8, 99, np.int32)  # names a column that keys does not have
    with pytest.raises(ValueError, match="names no column"):
        _speedups.index_find(slots, keys, keys, np.empty(4, np.int64))


def _random_tokens(rng: np.random.Generator, n: int) -> list[str]:
    """Tokens of 0 to 40 bytes (every place of a token's last 8-byte word), ASCII and not,
    a lone surrogate, many alike and some that differ in their last byte only."""
    alphabet = ["a", "b", "é", "日", "😀", "\x00", "\udc80", ":"]
    tokens = []
    for _ in range(n):
        if tokens and rng.random() < 0.2:
            token = tokens[int(rng.integers(len(tokens)))]
            tokens.append(token[:-1] + "z" if token and rng.random() < 0.5 else token)
            continue
        size = int(rng.integers(0, 41))
        tokens.append("".join(alphabet[int(i)] if rng.random() < 0.1 else "x"
                              for i in rng.integers(0, len(alphabet), size)))
    return tokens


@needs_c
def test_token_store_functions_in_c_equal_python():
    """Hashes, gathered bytes and byte comparisons of TokenStores: C against NumPy."""
    from textnb.features.token_store import TokenStore

    rng = np.random.default_rng(29)
    store_a = TokenStore(_random_tokens(rng, 700))
    store_b = TokenStore(list(store_a)[::-1] + _random_tokens(rng, 200))
    n = len(store_a)
    for start in (0, 1, 7, n // 2, n - 1, n):
        hashed = speedups.hash_tokens(store_a._bytes, store_a._ends, start)
        assert hashed.dtype == np.int64 and hashed.size == n - start
        assert hashed.tolist() == speedups.hash_tokens_python(store_a._bytes, store_a._ends,
                                                              start).tolist()
    positions = rng.integers(-n, n, 500)
    data, ends = speedups.gather_tokens(store_a._bytes, store_a._ends, positions)
    expected_data, expected_ends = speedups.gather_tokens_python(store_a._bytes, store_a._ends,
                                                                 positions)
    assert data == expected_data and ends.tolist() == expected_ends.tolist()
    assert TokenStore.from_utf8(data, ends) == TokenStore(store_a.take(positions))
    # Each token of b against itself in a (where it came from) and against random ones.
    other = rng.integers(0, len(store_b), 2000)
    mine = np.where(other < n, n - 1 - other, rng.integers(0, n, other.size))
    mine[::3] = rng.integers(0, n, mine[::3].size)
    same = speedups.equal_tokens(store_a._bytes, store_a._ends, mine, store_b._bytes,
                                 store_b._ends, other)
    expected = speedups.equal_tokens_python(store_a._bytes, store_a._ends, mine,
                                            store_b._bytes, store_b._ends, other)
    assert same.dtype == bool and same.tolist() == expected.tolist()
    assert same.tolist() == [store_a[i] == store_b[j] for i, j in zip(mine, other)]
    assert 200 < same.sum() < same.size  # both answers occur


@needs_c
def test_token_store_functions_check_their_arguments():
    data, ends = bytearray(b"abcdef"), np.array([2, 5, 6], dtype=np.int64)
    with pytest.raises(IndexError, match="out of range"):
        speedups.gather_tokens(data, ends, [3])
    with pytest.raises(IndexError, match="out of range"):
        speedups.equal_tokens(data, ends, [0], data, ends, [-4])
    with pytest.raises(ValueError, match="2 positions against 1"):
        speedups.equal_tokens(data, ends, [0, 1], data, ends, [0])
    for bad in ([2, 9, 6], [4, 2, 6]):  # past the bytes; not ascending
        bad_ends = np.array(bad, dtype=np.int64)
        with pytest.raises(ValueError, match="ascend within the bytes"):
            speedups.hash_tokens(data, bad_ends)
        with pytest.raises(ValueError, match="ascend within the bytes"):
            speedups.gather_tokens(data, bad_ends, [1])
    with pytest.raises(ValueError, match="from start"):
        _speedups.hash_tokens(data, ends, 4, np.empty(0, np.int64))
    with pytest.raises(TypeError, match="int64"):
        speedups.hash_tokens(data, np.array([2, 5, 6], dtype=np.int32))
    # The answers are copies: the store can still grow (no view of its buffers is alive).
    from textnb.features.token_store import TokenStore

    store = TokenStore(["ab", "cde"])
    _ = store.hashes(), store.take([1, 0]), store.equal_at([0], store, [1])
    store.extend(["more"])
    assert list(store) == ["ab", "cde", "more"]


@needs_c
def test_evidence_selection_in_c_equals_numpy():
    """Random contribution matrices, with many ties (values from a few levels), zeros,
    empty rows and a pair mask shorter than the columns: every k, cap, side mode and
    minimum strength selects the same positions in the same order both ways."""
    import scipy.sparse as sp

    rng = np.random.default_rng(31)
    levels = np.array([0.0, 0.5, -0.5, 1.25, -1.25, 2.0, -3.0, 3.0, 0.01, -0.01])
    for _ in range(40):
        n_rows, n_cols = int(rng.integers(0, 30)), int(rng.integers(1, 200))
        density = float(rng.uniform(0, 0.5))
        C = sp.random(n_rows, n_cols, density=density, format="csr", random_state=rng,
                      data_rvs=lambda n: rng.choice(levels, n) * rng.choice([1, 1, 1.5], n))
        C.sort_indices()
        limited = rng.random(int(rng.integers(0, n_cols + 1))) < 0.4
        for k in (1, 2, 3, 5, 20, 1000):
            for max_limited in (None, 0, 1, 2, 4, 25):
                for each_side in (False, True):
                    for min_strength in (0.0, 0.5, 1.3):
                        for mask in (None, limited):
                            args = (C, k, mask, max_limited, each_side, min_strength)
                            got = evidence.strongest_positions(*args)
                            expected = evidence.RankedEvidence(C, mask).positions(
                                k, max_limited, each_side, min_strength)
                            assert got.tolist() == expected.tolist(), args[1:]


@needs_c
def test_evidence_selection_checks_its_arguments():
    values, indices = np.array([1.0, -2.0]), np.array([0, 1], dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    none = np.zeros(0, np.uint8)
    with pytest.raises(ValueError, match="indptr must ascend"):
        _speedups.strongest_positions(values, indices, np.array([0, 3], dtype=np.int64), none,
                                      ((1, -1),), 0.0, out)
    with pytest.raises(ValueError, match="do not fit"):
        _speedups.strongest_positions(values, indices[:1], np.array([0, 2], dtype=np.int64),
                                      none, ((1, -1),), 0.0, out)
    with pytest.raises(ValueError, match="one or two"):
        _speedups.strongest_positions(values, indices, np.array([0, 2], dtype=np.int64), none,
                                      (), 0.0, out)
    with pytest.raises(ValueError, match="k must be >= 0"):
        _speedups.strongest_positions(values, indices, np.array([0, 2], dtype=np.int64), none,
                                      ((-1, -1),), 0.0, out)
    with pytest.raises(TypeError, match="float64"):
        _speedups.strongest_positions(values.astype(np.float32), indices,
                                      np.array([0, 2], dtype=np.int64), none, ((1, -1),), 0.0,
                                      out)
    assert _speedups.strongest_positions(values, indices, np.array([0, 2], dtype=np.int64),
                                         none, ((1, -1), (1, -1)), 0.0, out) == 2
    assert out.tolist() == [1, 0]  # the stronger (|-2|) first


@needs_c
@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.text(max_size=12), max_size=30))
def test_json_items_in_c_is_what_json_dumps_writes(tokens):
    """Any str a token can be (controls, NUL, DEL, quotes, backslashes, astral characters,
    lone surrogates): the C writer gives json.dumps's bytes, and they load back."""
    import json

    from textnb.features.token_store import TokenStore

    store = TokenStore(tokens + ["\x00\x7f\"\\\n\r\t\b\f\x1f", "\U0001F600\udc80\ud800", "é"])
    n = len(store)
    for start, stop in ((0, n), (1, n - 1), (n // 2, n), (0, 0)):
        items = _speedups.json_items(store._bytes, store._ends, start, stop)
        expected = json.dumps(store[start:stop])[1:-1].encode("ascii")
        assert items == expected
        assert items == speedups.json_items_python(store._bytes, store._ends, start, stop)
        assert json.loads(b"[" + items + b"]") == store[start:stop]


@needs_c
def test_json_items_leaves_bytes_that_are_not_utf8_to_python():
    ends = np.array([2, 4], dtype=np.int64)
    for data in (bytearray(b"ok\xff!"), bytearray(b"ok\xc3"), bytearray(b"ok\xe0\x80"),
                 bytearray(b"ok\xc0\xaf")):  # a stray byte, cut short, overlong forms
        ends[-1] = len(data)
        assert _speedups.json_items(data, ends, 0, 2) is None
    with pytest.raises(ValueError, match="out of range"):
        _speedups.json_items(bytearray(b"ab"), np.array([2], dtype=np.int64), 0, 2)
    with pytest.raises(ValueError, match="ascend"):  # found with the GIL released
        _speedups.json_items(bytearray(b"abcd"), np.array([3, 1], dtype=np.int64), 0, 2)


@needs_c
@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.text(max_size=12), max_size=30))
def test_pack_tokens_in_c_equals_python(tokens):
    """Every width of str (and lone surrogates): the same bytes and ends both ways."""
    tokens = tokens + ["ascii", "café", "日本", "\U0001F600", "\udc80", ""]
    data, ends = speedups.pack_tokens(tokens)
    expected_data, expected_ends = speedups.pack_tokens_python(tokens)
    assert data == expected_data == "".join(tokens).encode("utf-8", "surrogatepass")
    assert ends.tolist() == expected_ends.tolist()


@needs_c
def test_pack_tokens_takes_only_str():
    class Word(str):
        pass

    assert speedups.pack_tokens([Word("ab"), "c"])[0] == b"abc"  # as "".join takes them
    with pytest.raises(TypeError, match="must be str, not bytes"):
        speedups.pack_tokens(["ok", b"no"])
    with pytest.raises(ValueError, match="one item a token"):
        _speedups.pack_tokens(["a"], np.empty(2, np.int64))


@needs_c
@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.text(max_size=12), max_size=30))
def test_read_json_items_in_c_reads_what_json_loads_reads(tokens):
    """What json.dumps writes of any tokens, read in C: json.loads's strings, as UTF-8
    ("surrogatepass") one after another."""
    import json

    from textnb.features.token_store import TokenStore

    data = json.dumps(tokens).encode("ascii")
    text, ends = speedups.read_json_items(data)
    assert TokenStore.from_utf8(text, ends) == TokenStore(json.loads(data))


@needs_c
def test_read_json_items_has_room_for_the_shortest_items():
    """The ends' room comes from the length alone (4 bytes an item at least): lists of
    empty strings, the most items for their length, fit exactly."""
    import json

    for n in (0, 1, 2, 3, 1000):
        data = json.dumps([""] * n).encode("ascii")
        text, ends = speedups.read_json_items(data)
        assert len(ends) == n and not ends.any() and len(text) == 0


# Bytes that decide what the ledger's normalisation keeps: line ends of each kind, the
# bytes ``bytes.strip`` takes off a name, ':', the names and prefixes it drops in either
# case and near misses, a leading mbox line, bytes that are not ASCII.
_HEADER_PIECES = [b"\n", b"\r\n", b"\r", b" ", b"\t", b":", b"\x0b", b"\x0c", b"\x00", b"\xff",
                  b"From ", b"\n\n", b"Status", b"STATUS", b"status x", b"Lines", b"x-spam",
                  b"X-Spam-Flag", b"x-spa", b"X-TEXTNB-", b"x-evolution", b"Subject", b"a"]


@pytest.mark.system  # long fuzzing: 3,000 examples
@needs_c
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_HEADER_PIECES), max_size=30))
def test_normalise_message_in_c_equals_python(pieces):
    from textnb.models.ledger import _DROP_FIELD_NAMES, _DROP_PREFIX_NAMES

    raw = b"".join(pieces)
    expected = speedups.normalise_message_python(raw, _DROP_FIELD_NAMES, _DROP_PREFIX_NAMES)
    assert _speedups.normalise_message(raw, _DROP_FIELD_NAMES, _DROP_PREFIX_NAMES) == expected


@needs_c
def test_normalise_message_in_c_takes_its_names_as_given():
    raw = b"Keep: 1\nDrop-Me: 2\n\tmore\nDROPPED-too: 3\nkeep: 4\n\nbody\n\n"
    for fields, prefixes in [((b"drop-me",), (b"dropped",)), ((), ()), ((b"keep",), ())]:
        expected = speedups.normalise_message_python(raw, fields, prefixes)
        assert _speedups.normalise_message(raw, fields, prefixes) == expected
    assert _speedups.normalise_message(raw, (b"drop-me",), (b"dropped",)) == \
        b"Keep: 1\nkeep: 4\n\nbody\n"
    with pytest.raises(TypeError, match="names must be bytes"):
        _speedups.normalise_message(raw, ("drop-me",), ())


# Text with what the host name and IPv4 patterns turn on: labels of every length up to
# and past 63, dots, hyphens, digits, word characters that end a boundary ('_', letters)
# and those that do not.
_HOST_PIECES = list("ab.-_19xZ :[]()@;") + ["com", "org", "1.2", "255.", "..", "a" * 62,
                                            "b" * 63, "c" * 64, "1234", "é"]


@pytest.mark.system  # long fuzzing: 3,000 examples
@needs_c
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_HOST_PIECES), max_size=25))
def test_host_names_and_ipv4_in_c_equal_the_patterns(pieces):
    from textnb.text.tokenize import _HOSTNAME_LOWER, _IPV4

    text = "".join(pieces)
    lowered = text.lower()
    if text.isascii():
        assert _speedups.find_hostnames(lowered) == _HOSTNAME_LOWER.findall(lowered)
        assert _speedups.find_ipv4(text) == _IPV4.findall(text)
    else:  # the patterns' Unicode classes: left to them
        assert _speedups.find_hostnames(lowered) is None
        assert _speedups.find_ipv4(text) is None
    assert speedups.find_hostnames(lowered, _HOSTNAME_LOWER) == _HOSTNAME_LOWER.findall(lowered)
    assert speedups.find_ipv4(text, _IPV4) == _IPV4.findall(text)


@needs_c
def test_host_names_past_the_labels_c_keeps_go_to_the_pattern():
    from textnb.text.tokenize import _HOSTNAME_LOWER

    text = "a." * 200 + "com and x.y.example"
    assert _speedups.find_hostnames(text) is None
    assert speedups.find_hostnames(text, _HOSTNAME_LOWER) == _HOSTNAME_LOWER.findall(text)
    assert _speedups.find_hostnames("a." * 100 + "com") == ["a." * 100 + "com"]
    with pytest.raises(TypeError, match="must be a str"):
        _speedups.find_ipv4(b"1.2.3.4")


@needs_c
@pytest.mark.parametrize("corpus", ["spamassassin", "enron"])
def test_host_names_and_ipv4_in_c_on_the_corpora_header_values(shared_corpora, corpus):
    from textnb.mail.corpora import iter_corpus
    from textnb.mail.parse import parse_message
    from textnb.text.tokenize import _HOSTNAME_LOWER, _IPV4

    checked = 0
    for example in iter_corpus(corpus, root=shared_corpora):
        for _, value in parse_message(example.raw).headers:
            if value.isascii():
                lowered = value.lower()
                assert _speedups.find_hostnames(lowered) == _HOSTNAME_LOWER.findall(lowered)
                assert _speedups.find_ipv4(value) == _IPV4.findall(value)
                checked += 1
    assert checked > 10_000  # SpamAssassin: 147,000; Enron-Spam keeps few fields: 16,000


# Bytes that decide where a plain header section ends and how a field reads: line ends
# of each kind, the bytes no line may hold (\x0b, \x0c, \x1c-\x1e), blanks that make a
# continuation or lead a value, ':' and name bytes, a space inside a name, 8-bit bytes.
_FIELD_PIECES = [b"\n", b"\r\n", b"\r", b" ", b"\t", b":", b"\x0b", b"\x0c", b"\x1c", b"\x1e",
                 b"\x1f", b"\x01", b"\x7f", b"\x80", b"\xff", b"\n\n", b"Subject", b"X-A",
                 b"a", b"!", b"From ", b"=?utf-8?q?x?="]


@pytest.mark.system  # long fuzzing: 3,000 examples
@needs_c
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_FIELD_PIECES), max_size=30))
def test_plain_fields_in_c_equal_the_patterns(pieces):
    from textnb.mail.parse import _PLAIN_FIELD, _PLAIN_FIELDS

    raw = b"".join(pieces)
    expected = speedups.plain_fields_python(raw, _PLAIN_FIELDS, _PLAIN_FIELD)
    assert _speedups.plain_fields(raw) == expected


@needs_c
def test_plain_fields_in_c_by_hand():
    assert _speedups.plain_fields(b"A: b\n c\nX-Y:\t z \n\nbody") == \
        (17, [("A", "b\n c"), ("X-Y", "z ")])
    assert _speedups.plain_fields(b"Empty:  \n\tnext\nB:\n") == \
        (18, [("Empty", "\n\tnext"), ("B", "")])
    assert _speedups.plain_fields(b"A: \xff\n") == (5, [("A", "\udcff")])
    assert _speedups.plain_fields(b"A: b\r\n") is None  # a CR: left to the parser
    assert _speedups.plain_fields(b"A: b") is None  # no line end
    assert _speedups.plain_fields(b" A: b\n") is None  # a continuation first
    assert _speedups.plain_fields(b"A: b\nNo colon\n") == (5, [("A", "b")])
    assert _speedups.plain_fields(memoryview(b"A: b\n")) == (5, [("A", "b")])
    with pytest.raises(TypeError):
        _speedups.plain_fields("A: b\n")


@needs_c
@pytest.mark.parametrize("corpus", ["spamassassin", "enron", "lingspam"])
def test_plain_fields_in_c_on_the_corpora(shared_corpora, corpus):
    from textnb.mail.corpora import iter_corpus
    from textnb.mail.parse import _PLAIN_FIELD, _PLAIN_FIELDS, _skip_envelope

    checked = 0
    for example in iter_corpus(corpus, root=shared_corpora):
        raw = _skip_envelope(example.raw)
        expected = speedups.plain_fields_python(raw, _PLAIN_FIELDS, _PLAIN_FIELD)
        assert _speedups.plain_fields(raw) == expected
        checked += expected is not None
    assert checked > 1000
