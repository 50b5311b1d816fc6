"""Vocabulary and CSR building."""

import numpy as np
import pytest

from textnb.features.vectorize import Vocabulary, binarize, feature_mask

DOCS = [["free", "money", "free"], ["meeting", "notes"], ["free", "notes", "notes", "notes"]]


def test_tf_matrix_counts_tokens():
    vocab = Vocabulary()
    X = vocab.transform(DOCS, grow=True)
    assert vocab.tokens_ == ["free", "money", "meeting", "notes"]
    np.testing.assert_array_equal(X.toarray(), [[2, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 3]])
    assert X.has_sorted_indices


def test_binary_matrix_and_binarize_agree():
    vocab = Vocabulary()
    X = vocab.transform(DOCS, grow=True)
    B = Vocabulary(vocab.tokens_).transform(DOCS, binary=True)
    np.testing.assert_array_equal(B.toarray(), binarize(X).toarray())
    np.testing.assert_array_equal(B.toarray(), (X.toarray() > 0).astype(float))


def test_unknown_tokens_dropped_when_not_growing():
    vocab = Vocabulary(["free"])
    X = vocab.transform([["free", "unseen", "free"]])
    assert X.shape == (1, 1) and X[0, 0] == 2
    assert len(vocab) == 1


def test_single_string_is_refused():
    with pytest.raises(TypeError, match="single string"):
        Vocabulary().transform("free money")


def test_empty_input_gives_empty_matrix():
    X = Vocabulary(["a"]).transform([])
    assert X.shape == (0, 1)


def test_feature_mask_min_df_and_max_features():
    df = np.array([5, 1, 3, 3, 0, 2])
    np.testing.assert_array_equal(feature_mask(df, min_df=2), [1, 0, 1, 1, 0, 1])
    # the 3 most frequent, ties by column order
    np.testing.assert_array_equal(feature_mask(df, max_features=3), [1, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(feature_mask(df, min_df=3, max_features=2), [1, 0, 1, 0, 0, 0])


def _same_csr(a, b):
    return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr)
            and np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data))


def test_first_lookup_finds_the_columns_the_index_gives(sample_filter, sample_index):
    from textnb.mail.sources import iter_index

    tokens = sample_filter.vocabulary.tokens_
    docs = [sample_filter.tokens(m.raw) for m in iter_index(sample_index)][:5]
    docs.append(["never-seen", tokens[0], "never-seen"])
    indexed = Vocabulary(tokens)
    indexed.check()  # indexed before any lookup
    for binary in (False, True):
        lazy = Vocabulary(tokens)
        X = lazy.transform(docs, binary=binary)
        assert _same_csr(X, indexed.transform(docs, binary=binary))
        assert _same_csr(lazy.transform(docs, binary=binary), X)  # the second indexes them


def test_the_first_lookup_builds_no_index_and_the_second_does():
    """Seen through a repeated token, which only the index (or a lookup that meets it)
    finds: one message is scored without building the index, a batch builds it."""
    lazy = Vocabulary(["a", "b", "a"])
    assert lazy.transform([["b"]]).toarray().tolist() == [[0, 1, 0]]
    with pytest.raises(ValueError, match="duplicate"):
        lazy.transform([["b"]])


def test_repeated_token_is_reported_by_the_index_and_by_a_lookup_that_meets_it():
    with pytest.raises(ValueError, match="duplicate"):
        Vocabulary(["a", "b", "a"]).index_
    with pytest.raises(ValueError, match="duplicate"):
        Vocabulary(["a", "b", "a"]).check()
    np.testing.assert_array_equal(Vocabulary(["a", "b", "a"]).columns(["b", "c"]), [1, -1])
    with pytest.raises(ValueError, match="duplicate"):
        Vocabulary(["a", "b", "a"]).columns(["a"])


def test_growing_after_a_lookup_without_the_index_keeps_columns_in_order_of_first_sight():
    vocab = Vocabulary(["free", "money"])
    np.testing.assert_array_equal(vocab.columns(["money", "x"]), [1, -1])
    vocab.transform([["x", "free", "y"]], grow=True)
    assert vocab.tokens_ == ["free", "money", "x", "y"]
    assert vocab.index_ == {"free": 0, "money": 1, "x": 2, "y": 3}


@pytest.fixture(autouse=True, params=["table", "sorted"])
def index_kind(request, monkeypatch):
    """Every test here runs with each of the vocabulary's two indexes: the C hash table
    (``speedups.HashIndex``) and the sorted arrays (without the C module)."""
    from textnb._c import speedups
    from textnb.features import vectorize

    if request.param == "sorted":
        monkeypatch.setattr(vectorize, "hash_index", lambda: None)
    elif speedups.hash_index() is None:
        pytest.skip("textnb._c._speedups was not built: the sorted arrays are the only index")
    return request.param


@pytest.fixture
def colliding_hashes(monkeypatch):
    """Every token ending in "7" hashes alike, and the recent columns merge into the
    sorted arrays often. RETURNS the index's hash function so patched."""
    from textnb.features import vectorize

    monkeypatch.setattr(vectorize, "_MIN_REBUILD", 5)
    real_hashes = vectorize._token_hashes

    def hashes(store, start=0):
        sevens = np.array([t.endswith("7") for t in store[start:]], dtype=bool)
        return np.where(sevens, 7, real_hashes(store, start))

    monkeypatch.setattr(vectorize, "_token_hashes", hashes)
    return hashes


def test_the_compact_index_is_exact_across_merges_and_shared_hashes(colliding_hashes,
                                                                     index_kind):
    """Columns found through the sorted hash arrays, the recent ones and the shared-hash
    dict are those of a plain dict, across many merges; tokens whose string hash
    collides (forced here) are still told apart by comparing the strings."""
    vocab, plain = Vocabulary(), {}
    rng = np.random.default_rng(0)
    both = False  # the main arrays and the recent ones held columns at the same time
    for step in range(40):
        batch = [f"t{i}" for i in rng.integers(0, 300, size=25)]
        got = vocab.add(batch)
        both |= bool(vocab._hashes.size and vocab._new_hashes.size)
        for token in batch:
            plain.setdefault(token, len(plain))
        np.testing.assert_array_equal(got, [plain[t] for t in batch])
        assert vocab.tokens_ == list(plain)
    probe = [f"t{i}" for i in range(320)]
    np.testing.assert_array_equal(vocab.columns(probe), [plain.get(t, -1) for t in probe])
    assert vocab._shared  # a forced collision was told apart by the strings
    assert both or index_kind == "table"  # the sorted index: main and recent arrays both used
    assert vocab.index_ == plain
    assert "t17" in vocab and "t307" not in vocab


@pytest.mark.parametrize("distinct, given_hashes", [(True, True), (True, False), (False, False)])
def test_tokens_added_as_bytes_get_a_plain_dicts_columns(colliding_hashes, distinct,
                                                         given_hashes):
    """A worker's counts come as a TokenStore (``Vocabulary.add`` compares and copies
    them as bytes): the columns are those of a plain dict, with forced hash collisions,
    non-ASCII tokens, and repeats (which take the str path)."""
    from textnb.features.token_store import TokenStore

    hashes = colliding_hashes
    vocab, plain = Vocabulary(), {}
    rng = np.random.default_rng(1)
    for step in range(40):
        batch = [f"t{i}" if i % 3 else f"é{i}" for i in rng.integers(0, 300, size=25)]
        if distinct:
            batch = list(dict.fromkeys(batch))
        store = TokenStore(batch)
        got = vocab.add(store, hashes(store) if given_hashes else None)
        for token in batch:
            plain.setdefault(token, len(plain))
        np.testing.assert_array_equal(got, [plain[t] for t in batch])
        assert vocab.tokens_ == list(plain)
    probe = [f"t{i}" for i in range(320)] + [f"é{i}" for i in range(320)]
    np.testing.assert_array_equal(vocab.columns(probe), [plain.get(t, -1) for t in probe])
    assert vocab._shared and vocab.index_ == plain


def test_a_repeated_token_with_a_shared_hash_is_still_reported(monkeypatch):
    from textnb.features import vectorize

    monkeypatch.setattr(vectorize, "_token_hashes",
                        lambda store, start=0: np.ones(len(store) - start, dtype=np.int64))
    with pytest.raises(ValueError, match="duplicate"):
        Vocabulary(["a", "b", "c", "b"]).check()
    np.testing.assert_array_equal(Vocabulary(["a", "b", "c"]).add(["c", "d", "a"]), [2, 3, 0])


def test_merging_sorted_arrays_in_place_equals_sorting_them_together(monkeypatch):
    from textnb.features import vectorize

    rng = np.random.default_rng(0)
    for _ in range(200):
        monkeypatch.setattr(vectorize, "_MERGE_CHUNK", int(rng.integers(1, 10)))
        n, m = rng.integers(0, 40, size=2)
        keys, new_keys = np.sort(rng.integers(0, 50, n)), np.sort(rng.integers(0, 50, m))
        values, new_values = rng.integers(0, 1000, n), rng.integers(0, 1000, m)
        merged_keys, merged_values = keys.copy(), values.copy()
        vectorize._merge_into(merged_keys, merged_values, new_keys, new_values)
        np.testing.assert_array_equal(merged_keys, np.sort(np.concatenate([keys, new_keys])))
        pairs = zip(np.concatenate([keys, new_keys]).tolist(),
                    np.concatenate([values, new_values]).tolist())
        assert sorted(zip(merged_keys.tolist(), merged_values.tolist())) == sorted(pairs)


def test_adding_with_the_tokens_hashes_given_is_adding_without():
    """``Vocabulary.add(tokens, hashes)`` (the counts' own hashes, engines.counting) gives
    the columns and index that hashing the tokens again gives."""
    from textnb.features.token_store import TokenStore

    batches = [["a", "b", "caf\u00e9"], ["b", "\udc80", "d", "a"], ["e", "a\x00", "d"]]
    given, hashed = Vocabulary(), Vocabulary()
    for batch in batches:
        np.testing.assert_array_equal(given.add(batch, TokenStore(batch).hashes()),
                                      hashed.add(batch))
    assert given.tokens_ == hashed.tokens_
    probe = ["d", "x", "a", "\udc80"]
    np.testing.assert_array_equal(given.columns(probe), hashed.columns(probe))


def test_a_vocabulary_of_a_store_takes_the_store_over():
    """``Vocabulary.of_store`` (a model's load): the store read is the vocabulary's own,
    not a copy; ``SpamFilter.from_counts`` takes such a vocabulary as it is."""
    from textnb.config import FilterConfig
    from textnb.features.token_store import TokenStore
    from textnb.spamfilter import SpamFilter

    store = TokenStore(["free", "money", "bi:free money"])
    vocabulary = Vocabulary.of_store(store)
    assert vocabulary.tokens_ is store
    assert vocabulary.columns(["money", "nope"]).tolist() == [1, -1]
    assert vocabulary.add(["new", "free"]).tolist() == [3, 0]
    assert list(store) == ["free", "money", "bi:free money", "new"]
    spam_filter = SpamFilter.from_counts(FilterConfig(), vocabulary, np.ones(2),
                                         np.ones((2, 4)), np.ones(4))
    assert spam_filter.vocabulary is vocabulary
    copied = SpamFilter.from_counts(FilterConfig(), store, np.ones(2), np.ones((2, 4)),
                                    np.ones(4))
    assert copied.vocabulary.tokens_ is not store and copied.vocabulary.tokens_ == store
    # adopt: a loader's own count arrays are taken as they are; without it, copied.
    counts, doc_freq = np.ones((2, 4)), np.ones(4)
    adopted = SpamFilter.from_counts(FilterConfig(), store, np.ones(2), counts, doc_freq,
                                     adopt=True)
    assert np.shares_memory(adopted.model.feature_count_, counts)
    assert np.shares_memory(adopted.doc_freq_, doc_freq)
    assert not np.shares_memory(copied.model.feature_count_, counts)
