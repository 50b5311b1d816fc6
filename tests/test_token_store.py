"""TokenStore reads as the list of str it packs (textnb.features.token_store)."""

import numpy as np
import pytest

from textnb.features.token_store import TokenStore

# ASCII, empty, accented, astral, lone surrogates, word pairs and a prefix alone.
TOKENS = ["free", "bi:free money", "", "café", "\U0001f600", "\ud83d\ude00x\udcff", "bi:",
          "b", "subject:bi:"]


def test_a_store_reads_as_the_list_it_was_given():
    store = TokenStore(TOKENS)
    assert store == TOKENS and TOKENS == store and not store != TOKENS
    assert list(store) == TOKENS and len(store) == len(TOKENS)
    assert [store[i] for i in range(-len(TOKENS), len(TOKENS))] == TOKENS + TOKENS
    for piece in (slice(None), slice(2, 6), slice(None, None, -2), slice(5, 2), slice(-3, None)):
        assert store[piece] == TOKENS[piece]
    assert store.take([4, -1, 0, 4]) == [TOKENS[i] for i in (4, -1, 0, 4)]
    assert store.take(np.zeros(0, dtype=np.int64)) == []
    assert store.index("b") == TOKENS.index("b") and "café" in store and "caf" not in store
    with pytest.raises(IndexError):
        store[len(TOKENS)]
    with pytest.raises(IndexError):
        store.take([len(TOKENS)])


def test_growing_after_reads_keeps_every_token():
    """Reads hand out no view of the buffers, so the store still grows after them."""
    store, plain = TokenStore(), []
    for step in range(5):
        batch = [f"{t}{step}" for t in TOKENS]
        store.extend(iter(batch))
        plain.extend(batch)
        assert store.take(range(len(plain))) == plain and store.startswith("bi:").size == len(plain)
    store.append("last")
    assert store == plain + ["last"] and store.copy() == store
    assert store.nbytes == sum(len(t.encode("utf-8", "surrogatepass")) + 8 for t in store)


def test_iteration_crosses_chunks(monkeypatch):
    from textnb.features import token_store

    monkeypatch.setattr(token_store, "_CHUNK", 4)
    assert list(TokenStore(TOKENS)) == TOKENS


def test_startswith_tests_the_prefix_on_the_bytes():
    store = TokenStore(TOKENS)
    expected = [t.startswith("bi:") for t in TOKENS]
    np.testing.assert_array_equal(store.startswith("bi:"), expected)
    np.testing.assert_array_equal(store.startswith("bi:", 6), expected[6:])
    np.testing.assert_array_equal(store.startswith("café"), [t.startswith("café") for t in TOKENS])
    assert TokenStore().startswith("bi:").size == 0
    assert not TokenStore([""]).startswith("bi:").any()


def test_only_strings_go_in():
    with pytest.raises(TypeError):
        TokenStore([b"bytes"])


def test_a_tokens_hash_depends_on_its_bytes_alone():
    """The index's hash: the same for a token wherever it stands, and different for the
    tokens here (lengths that differ by a NUL byte, one word and a byte more)."""
    tokens = [*TOKENS, "a", "a\x00", "abcdefgh", "abcdefgh\x00", "abcdefghi"]
    hashes = TokenStore(tokens).hashes()
    assert hashes.dtype == np.int64 and len(set(hashes.tolist())) == len(tokens)
    np.testing.assert_array_equal(TokenStore(["x", *tokens]).hashes(1), hashes)
    np.testing.assert_array_equal([TokenStore([t]).hashes()[0] for t in tokens], hashes)


def test_a_store_from_utf8_bytes_and_ends_reads_as_the_tokens():
    data = "".join(TOKENS).encode("utf-8", "surrogatepass")
    ends = np.cumsum([len(t.encode("utf-8", "surrogatepass")) for t in TOKENS])
    assert TokenStore.from_utf8(data, ends) == TOKENS == TokenStore.from_utf8(bytearray(data), ends)
    assert TokenStore.from_utf8(b"", []) == []
    for bad in (ends[:-1], ends[::-1], np.append(ends, ends[-1] + 1)):
        with pytest.raises(ValueError, match="token ends"):
            TokenStore.from_utf8(data, bad)
    with pytest.raises(ValueError, match="no token ends"):
        TokenStore.from_utf8(data, [])


def test_tokens_compared_and_copied_as_bytes():
    a = TokenStore(["abc", "héllo", "", "x", "bi:a b", "zz", "\ud800"])
    b = TokenStore(["zz", "héllo", "abd", "", "x", "ab", "\ud800"])
    got = a.equal_at([5, 1, 0, 2, 3, 0, -1, 4], b, [0, 1, 2, 3, 4, 5, 6, 0])
    assert got.tolist() == [True, True, False, True, True, False, True, False]
    assert a.equal_at([], b, []).tolist() == []
    a.extend_from(b, [2, 1, -1])
    assert a == ["abc", "héllo", "", "x", "bi:a b", "zz", "\ud800", "abd", "héllo", "\ud800"]
    a.extend_from(b, [])
    assert len(a) == 10 and a.hashes()[-1] == TokenStore(["\ud800"]).hashes()[0]
    with pytest.raises(IndexError):
        a.equal_at([0], b, [7])


def test_before_first_reads_each_namespace_on_the_bytes(monkeypatch):
    from textnb.features import token_store

    monkeypatch.setattr(token_store, "_CHUNK", 4)  # across chunk boundaries
    tokens = ["cheap", "received:mx", "", ":x", "a b:c", "café:x", "x:y:z", "verylongname:1"]
    lengths, heads, graphic = TokenStore(tokens).before_first(":", 4, 1)
    assert lengths.tolist() == [8, -1, 0, 3, 5, 1, 12]
    assert heads.tolist() == [b"rece", b"", b"", b"a b", b"caf\xc3", b"x", b"very"]
    assert graphic.tolist() == [True, False, True, False, False, True, True]
