"""Evidence selection with word pairs capped (textnb.models.evidence)."""

import numpy as np
import pytest
import scipy.sparse as sp

from textnb.config import FilterConfig, ModelConfig, TokenizerConfig
from textnb.mail.sources import iter_index
from textnb.models import evidence
from textnb.models.naive_bayes import MultinomialNB
from textnb.spamfilter import SpamFilter

RNG = np.random.default_rng(7)
X_TRAIN = sp.csr_matrix((RNG.random((60, 30)) < 0.3).astype(float))
Y_TRAIN = np.r_[np.zeros(30, int), np.ones(30, int)]
X_TEST = sp.csr_matrix((RNG.random((12, 30)) < 0.5).astype(float))
PAIRS = np.zeros(30, bool)
PAIRS[::3] = True  # every third column is a "pair"


def model():
    return MultinomialNB(alpha=0.5).fit(X_TRAIN, Y_TRAIN)


def test_pair_columns_marks_the_pair_namespace():
    mask = evidence.pair_columns(["viagra", "bi:cheap viagra", "subject:bi", "bi:a b"])
    assert mask.tolist() == [False, True, False, True]


def by_hand(m, x_row, k, cap):
    """The selection spelled out for one document: strongest first, pairs capped."""
    w = m.feature_log_prob_[1] - m.feature_log_prob_[0]
    cols = x_row.indices
    contrib = x_row.data * w[cols]
    kept, pairs = [], 0
    for i in sorted(range(len(cols)), key=lambda i: (-abs(contrib[i]), cols[i])):
        if PAIRS[cols[i]]:
            if pairs >= cap:
                continue
            pairs += 1
        kept.append(contrib[i])
    if not k:  # all tokens: plain naive Bayes, nothing capped
        kept = [x * 1.0 for x in contrib]
    kept = kept[:k] if k else kept
    return m.class_log_prior_[1] - m.class_log_prior_[0] + sum(kept)


@pytest.mark.parametrize("k,cap", [(5, 0), (5, 1), (5, 2), (8, 3), (0, 2), (4, 10)])
def test_selection_matches_a_hand_written_loop(k, cap):
    m = model()
    got = m.selected_log_odds(X_TEST, k, PAIRS, cap)
    want = [by_hand(m, X_TEST[i], k, cap) for i in range(X_TEST.shape[0])]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_without_pairs_or_with_a_loose_cap_it_is_the_models_own_selection():
    m = model()
    plain = m.selected_log_odds(X_TEST, 6)
    assert np.array_equal(m.selected_log_odds(X_TEST, 6, None, 2), plain)
    assert np.array_equal(m.selected_log_odds(X_TEST, 6, np.zeros(30, bool), 2), plain)
    assert np.array_equal(m.selected_log_odds(X_TEST, 6, PAIRS, 6), plain)
    # A cap at k cannot bind: the general path gives the same numbers.
    C, base = m.log_odds_contributions(X_TEST)
    C = sp.csr_matrix(C)
    C.sort_indices()
    keep = evidence.strongest(C, 6, PAIRS, 6)
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    np.testing.assert_allclose(base + np.bincount(rows[keep], C.data[keep], C.shape[0]), plain,
                               atol=1e-12)


def test_strongest_orders_each_row_strongest_first_and_respects_the_cap():
    m = model()
    C, _ = m.log_odds_contributions(X_TEST)
    C = sp.csr_matrix(C)
    C.sort_indices()
    keep = evidence.strongest(C, 7, PAIRS, 2)
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))[keep]
    assert np.all(np.diff(rows) >= 0)
    for r in np.unique(rows):
        mine = keep[rows == r]
        assert len(mine) <= 7
        assert PAIRS[C.indices[mine]].sum() <= 2
        assert np.all(np.diff(np.abs(C.data[mine])) <= 0)


def each_side_by_hand(m, x_row, k, cap):
    """Each side spelled out: the k - k//2 strongest positive contributions (at most
    cap - cap//2 pairs) and the k//2 strongest negative ones (at most cap//2 pairs)."""
    w = m.feature_log_prob_[1] - m.feature_log_prob_[0]
    cols = x_row.indices
    contrib = x_row.data * w[cols]
    total = 0.0
    for sign, places, pair_cap in ((1, k - k // 2, cap - cap // 2), (-1, k // 2, cap // 2)):
        kept = pairs = 0
        for i in sorted(range(len(cols)), key=lambda i: (-abs(contrib[i]), cols[i])):
            if np.sign(contrib[i]) != sign or kept == places:
                continue
            if PAIRS[cols[i]]:
                if pairs >= pair_cap:
                    continue
                pairs += 1
            total += contrib[i]
            kept += 1
    return m.class_log_prior_[1] - m.class_log_prior_[0] + total


@pytest.mark.parametrize("k,cap", [(6, 2), (6, 0), (7, 3), (4, 10), (2, 1), (1, 1)])
def test_each_side_matches_a_hand_written_loop(k, cap):
    m = model()
    got = m.selected_log_odds(X_TEST, k, PAIRS, cap, each_side=True)
    want = [each_side_by_hand(m, X_TEST[i], k, cap) for i in range(X_TEST.shape[0])]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # The two modes differ on this data, so the comparison above bites.
    assert not np.allclose(got, m.selected_log_odds(X_TEST, k, PAIRS, cap)) or k < 2


def test_each_side_keeps_ham_clues_a_spammy_message_would_crowd_out():
    """One row: five strong spam clues and two weaker ham clues. The k = 4 strongest
    are all spam; each side keeps the two strongest spam and both ham clues."""
    C = sp.csr_matrix(np.array([[5.0, 4.5, 4.0, 3.5, 3.0, -2.0, -1.0]]))
    assert evidence.RankedEvidence(C).sums(4).tolist() == [17.0]
    assert evidence.RankedEvidence(C).sums(4, each_side=True).tolist() == [6.5]
    assert evidence.strongest(C, 4, each_side=True).tolist() == [0, 1, 5, 6]
    assert evidence.split_places(5, 3) == ((3, 2), (2, 1))


def test_one_ranking_serves_every_k_and_cap():
    """What `tune --search` relies on: sort once, then any (k, cap) is the selection
    the model would make itself (the hand-written loop)."""
    m = model()
    C, base = m.log_odds_contributions(X_TEST)
    C = sp.csr_matrix(C)
    C.sort_indices()
    ranked = evidence.RankedEvidence(C, PAIRS)
    for k, cap in [(5, 0), (5, 1), (8, 3), (4, 10), (0, 2), (30, 2), (1, 1)]:
        want = [by_hand(m, X_TEST[i], k, cap) for i in range(X_TEST.shape[0])]
        np.testing.assert_allclose(base + ranked.sums(k, cap), want, rtol=0, atol=1e-9)
        assert np.array_equal(ranked.positions(k, cap), evidence.strongest(C, k, PAIRS, cap))
        want = [each_side_by_hand(m, X_TEST[i], k, cap) for i in range(X_TEST.shape[0])]
        if k:
            np.testing.assert_allclose(base + ranked.sums(k, cap, each_side=True), want,
                                       rtol=0, atol=1e-9)
    empty = evidence.RankedEvidence(sp.csr_matrix((3, 30)), PAIRS)
    assert empty.sums(5, 1).tolist() == [0.0, 0.0, 0.0]


def test_the_filter_caps_pairs_when_the_tokenizer_makes_them(sample_index):
    sample_messages = list(iter_index(sample_index))
    cfg = FilterConfig(tokenizer=TokenizerConfig(bigrams=True),
                       model=ModelConfig(max_discriminators=12, max_pair_discriminators=3,
                                         header_places=0, header_discriminators=0))
    f = SpamFilter(cfg).fit(sample_messages)
    msg = sample_messages[0]
    explained = f.explain(msg, k=50)
    pairs = [c for c in explained.clues if c[0].startswith("bi:")]
    assert explained.tokens_used == len(explained.clues) == 12 and len(pairs) <= 3
    # The explanation's clues are exactly what the score is made of.
    total = explained.prior_log_odds + explained.absence_log_odds
    assert f.log_odds([msg.raw])[0] == pytest.approx(total + sum(c[1] for c in explained.clues),
                                                     abs=1e-9)
    # Without a cap the same model lets more pairs in (the sample mail is full of them).
    loose = SpamFilter(FilterConfig(tokenizer=TokenizerConfig(bigrams=True),
                                    model=ModelConfig(max_discriminators=12,
                                                      max_pair_discriminators=12,
                                                      header_places=0,
                                                      header_discriminators=0)))
    loose.fit(sample_messages)
    assert sum(c[0].startswith("bi:") for c in loose.explain(msg, k=50).clues) > 3


@pytest.mark.parametrize("n_rows", [5, (1 << 16) + 3])
def test_strongest_first_is_lexsorts_order_ties_included(n_rows):
    # Few distinct strengths, so most entries tie and must keep their column order;
    # past 65,536 rows the radix path gives way to lexsort itself.
    rng = np.random.default_rng(7)
    rows = np.sort(rng.integers(0, n_rows, size=200_000))
    value = rng.integers(-4, 5, size=rows.size).astype(np.float64)
    key, spam = -np.abs(value), value > 0
    assert np.array_equal(evidence._strongest_first(key, rows, spam),
                          np.lexsort((spam, key, rows)))
    assert evidence._strongest_first(np.zeros(0), np.zeros(0, np.int64),
                                     np.zeros(0, bool)).size == 0


@pytest.mark.parametrize("evidence_mode", ["strongest", "each-side"])
def test_a_score_does_not_depend_on_the_vocabularys_column_order(evidence_mode):
    """Clues as strong on opposite sides (Bernoulli's are, by symmetry: a token in 1 spam and
    no ham against one in every ham and all spams but one) tie at the last place: the ham
    clue is kept, wherever the columns are, so two models with the same counts in another
    column order (a shared store's hosts) score alike."""
    ties = np.array([[3.0, -3.0, 5.0, -3.0, 3.0, 1.0]])
    scores = set()
    for perm in ([0, 1, 2, 3, 4, 5], [1, 0, 2, 4, 3, 5], [5, 4, 3, 2, 1, 0], [3, 2, 4, 0, 1, 5]):
        C = sp.csr_matrix(ties[:, perm])
        for k in (2, 3, 4):
            kept = evidence.strongest(C, k, each_side=evidence_mode == "each-side")
            ranked = evidence.RankedEvidence(C).positions(k, each_side=evidence_mode == "each-side")
            assert np.array_equal(kept, ranked)  # C and NumPy alike
            scores.add((k, float(C.data[kept].sum()), tuple(C.data[kept])))
    # per k one score and one order of values, whatever the column order
    assert len({k for k, _, _ in scores}) == len(scores) == 3
    if evidence_mode == "strongest":
        assert (2, 2.0, (5.0, -3.0)) in scores  # the tie at the last place goes to the ham clue


# -- places for header evidence (model.header_places) -------------------------------
HEADERS = np.zeros(30, bool)
HEADERS[1::4] = True  # every fourth column, from the second, "comes from a header field"


def sides_by_hand(m, x_row, k, cap):
    """(columns, contributions, and per side: its places, its pair cap and its entries
    strongest first, ties in column order) of one row, spelled out."""
    w = m.feature_log_prob_[1] - m.feature_log_prob_[0]
    cols, contrib = x_row.indices, x_row.data * w[x_row.indices]
    (k_spam, cap_spam), (k_ham, cap_ham) = evidence.split_places(k, cap)
    sides = []
    for positive, k_side, cap_side in ((True, k_spam, cap_spam), (False, k_ham, cap_ham)):
        side = [i for i in range(len(cols)) if (contrib[i] > 0) == positive and contrib[i] != 0]
        side.sort(key=lambda i: (-abs(contrib[i]), cols[i]))
        sides.append((k_side, cap_side, side))
    return cols, contrib, sides


def header_places_by_hand(m, x_row, k, cap, places):
    """Each side spelled out: its `places` (at most k // 2) strongest header clues, then its
    strongest remaining clues of any kind (pairs capped) up to the side's places."""
    cols, contrib, sides = sides_by_hand(m, x_row, k, cap)
    total = 0.0
    for k_side, cap_side, side in sides:
        head = [i for i in side if HEADERS[cols[i]]][:min(places, k // 2)]
        left, pairs = k_side - len(head), 0
        body = []
        for i in side:
            if i in head or len(body) >= left:
                continue
            if PAIRS[cols[i]]:
                if pairs >= cap_side:
                    continue
                pairs += 1
            body.append(i)
        total += sum(contrib[i] for i in head + body)
    return m.class_log_prior_[1] - m.class_log_prior_[0] + total


@pytest.mark.parametrize("k,cap,places", [(8, 2, 1), (8, 6, 2), (12, 4, 3), (6, 2, 3), (4, 0, 5)])
def test_header_places_match_a_hand_written_loop(k, cap, places):
    m = model()
    want = [header_places_by_hand(m, X_TEST[i], k, cap, places) for i in range(X_TEST.shape[0])]
    got = m.selected_log_odds(X_TEST, k, PAIRS, cap, each_side=True, header=HEADERS,
                              header_places=places)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # The tuner's one-sort selection gives the same sums.
    C, base = m.log_odds_contributions(X_TEST)
    ranked = evidence.RankedEvidence(sp.csr_matrix(C), PAIRS, HEADERS)
    np.testing.assert_allclose(base + ranked.sums(k, cap, each_side=True, header_places=places),
                               want, rtol=0, atol=1e-9)


def test_header_places_give_the_route_a_say_against_a_wordy_advertisement():
    # One message: six strong spam words, one weaker spam header clue, and two header
    # clues on the ham side (a mailing list the owner reads).
    values = np.array([9.0, 8.5, 8.0, 7.5, 7.0, 6.5, 2.0, -4.0, -3.5])
    columns = np.arange(9)
    C = sp.csr_matrix((values, columns, [0, 9]), shape=(1, 9))
    header = np.zeros(9, bool)
    header[[6, 7, 8]] = True
    one_ranking = evidence.strongest(C, 8, each_side=True)
    assert sorted(values[one_ranking]) == [-4.0, -3.5, 7.5, 8.0, 8.5, 9.0]
    kept = evidence.strongest(C, 8, each_side=True, header=header, header_places=1)
    # The spam side: its header clue, then the three strongest words; the ham side: its
    # two clues (the second takes a place of any kind). Strongest first.
    assert values[kept].tolist() == [9.0, 8.5, 8.0, -4.0, -3.5, 2.0]
    # Without the mask (or with places 0, or with one ranking) nothing changes.
    for kwargs in ({"header_places": 1}, {"header": header}):
        assert np.array_equal(evidence.strongest(C, 8, each_side=True, **kwargs), one_ranking)
    assert np.array_equal(evidence.strongest(C, 8, header=header, header_places=1),
                          evidence.strongest(C, 8))


def test_header_places_keep_the_selection_in_row_and_strength_order():
    rng = np.random.default_rng(3)
    C = sp.random(200, 40, density=0.4, format="csr", random_state=4)
    C.data = rng.normal(0, 3, C.data.size)
    header = rng.random(40) < 0.3
    pairs = (rng.random(40) < 0.3) & ~header  # word pairs are content, never header fields
    kept = evidence.strongest(C, 10, pairs, 4, True, header=header, header_places=2)
    rows = np.repeat(np.arange(200), np.diff(C.indptr))[kept]
    assert np.all(np.diff(rows) >= 0)
    for r in range(200):
        mine = kept[rows == r]
        strength = np.abs(C.data[mine])
        assert np.all(np.diff(strength) <= 0)
        for positive in (True, False):
            side = mine[(C.data[mine] > 0) == positive]
            assert side.size <= 5 and pairs[C.indices[side]].sum() <= 2
            # The side keeps its 2 strongest header clues, as far as it has them.
            row_side = np.arange(C.indptr[r], C.indptr[r + 1])
            row_side = row_side[(C.data[row_side] > 0) == positive]
            row_header = row_side[header[C.indices[row_side]]]
            strongest_header = row_header[np.argsort(-np.abs(C.data[row_header]),
                                                     kind="stable")][:2]
            assert set(strongest_header.tolist()) <= set(side.tolist())
    np.testing.assert_array_equal(
        kept, evidence.RankedEvidence(C, pairs, header).positions(10, 4, True, header_places=2))


# -- the route and the text apart (model.header_discriminators) ------------------------
def route_and_text_by_hand(m, x_row, k, cap, header_clues):
    """Each side spelled out: its `header_clues` strongest header clues, and apart from
    them its k // 2 (spam: k - k // 2) strongest clues of the text, pairs capped."""
    cols, contrib, sides = sides_by_hand(m, x_row, k, cap)
    total = 0.0
    for k_side, cap_side, side in sides:
        route = [i for i in side if HEADERS[cols[i]]][:header_clues]
        text, pairs = [], 0
        for i in side:
            if HEADERS[cols[i]] or len(text) >= k_side:
                continue
            if PAIRS[cols[i]]:
                if pairs >= cap_side:
                    continue
                pairs += 1
            text.append(i)
        total += sum(contrib[i] for i in route + text)
    return m.class_log_prior_[1] - m.class_log_prior_[0] + total


@pytest.mark.parametrize("k,cap,header_clues", [(8, 2, 1), (8, 6, 4), (12, 4, 3), (6, 2, 6),
                                                (4, 0, 2)])
def test_route_and_text_match_a_hand_written_loop(k, cap, header_clues):
    m = model()
    want = [route_and_text_by_hand(m, X_TEST[i], k, cap, header_clues)
            for i in range(X_TEST.shape[0])]
    for places in (0, 2):  # header_places has nothing to reserve beside header_clues
        got = m.selected_log_odds(X_TEST, k, PAIRS, cap, each_side=True, header=HEADERS,
                                  header_places=places, header_clues=header_clues)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # The tuner's one-sort selection gives the same sums, and the same positions.
    C, base = m.log_odds_contributions(X_TEST)
    C = sp.csr_matrix(C)
    C.sort_indices()
    ranked = evidence.RankedEvidence(C, PAIRS, HEADERS)
    np.testing.assert_allclose(base + ranked.sums(k, cap, each_side=True,
                                                  header_clues=header_clues),
                               want, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(
        ranked.positions(k, cap, True, header_clues=header_clues),
        evidence.strongest(C, k, PAIRS, cap, True, header=HEADERS, header_clues=header_clues))


def test_route_and_text_each_keep_their_places_whatever_the_other_holds():
    # A list's advertisement: eight strong spam words, and the list's five header clues
    # on the ham side, with one weak spam header clue.
    values = np.array([9.0, 8.8, 8.6, 8.4, 8.2, 8.0, 7.8, 7.6, 0.5, -6.1, -6.0, -5.9, -5.8,
                       -5.7, -0.2])
    columns = np.arange(values.size)
    C = sp.csr_matrix((values, columns, [0, values.size]), shape=(1, values.size))
    header = np.zeros(values.size, bool)
    header[8:14] = True  # the weak spam header clue and the five ham header clues
    kept = evidence.strongest(C, 8, each_side=True, header=header, header_clues=4)
    # The spam side: the text's 4 strongest words and the route's one clue; the ham side:
    # the route's 4 strongest clues and the text's one (-0.2). Strongest first.
    assert values[kept].tolist() == [9.0, 8.8, 8.6, 8.4, -6.1, -6.0, -5.9, -5.8, 0.5, -0.2]
    # With one budget shared (two of each side's four places kept for the route), the
    # spam side's weak route clue takes a word's place (8.4 no longer counts) and the
    # ham side's route fills all four, leaving the text's ham clue none.
    shared = evidence.strongest(C, 8, each_side=True, header=header, header_places=2)
    assert values[shared].tolist() == [9.0, 8.8, 8.6, -6.1, -6.0, -5.9, -5.8, 0.5]
    # Without the header mask, or with one ranking, header_clues changes nothing.
    assert np.array_equal(evidence.strongest(C, 8, each_side=True, header_clues=4),
                          evidence.strongest(C, 8, each_side=True))
    assert np.array_equal(evidence.strongest(C, 8, header=header, header_clues=4),
                          evidence.strongest(C, 8))


def test_header_columns_are_the_fields_other_than_subject():
    tokens = ["viagra", "bi:cheap pills", "subject:free", "header:subject", "url:example.com",
              "href-path:buy", "control:bad-base64", "num:dd", "email:domain:x.org",
              "attachment:ext:exe", "content:html", "script:han", "skip:h 50", ":",
              "from:domain:example.com", "received:mail.example.org", "list-id:users",
              "header:list-id", "x-mailer:outlook", "header-control:nul", "date:zone:+0100"]
    mask = evidence.header_columns(tokens)
    assert [t for t, h in zip(tokens, mask) if h] == tokens[14:]


def test_header_columns_of_a_token_store_are_is_header_token(monkeypatch):
    from textnb.features import token_store
    from textnb.features.token_store import TokenStore
    from textnb.text.namespaces import is_header_token

    monkeypatch.setattr(token_store, "_CHUNK", 4)  # across chunk boundaries
    tokens = ["cheap", "received:mail.x", "header:subject", "header:subjectx", "header:list-id",
              ":x", "a b:c", "Received:x", "url:x", "subject:x", "attachment:pdf", "café:x",
              "x:café", "averylongheadername-beyond-the-width:y", "url-path:a", "bi:a b", "",
              "urlx:y", "from:domain:ex.com", "header:", "x\x00:y", "header:subject"]
    want = np.array([is_header_token(t) for t in tokens])
    for start in (0, 3, len(tokens)):
        np.testing.assert_array_equal(evidence.header_columns(TokenStore(tokens), start),
                                      want[start:])
        np.testing.assert_array_equal(evidence.header_columns(tokens, start), want[start:])
