"""bench/stats.py's paired bootstrap (bench/significance.py's) on scores whose answer
is known, and bench/folds.py's folds (bench/tenfold_parts.py's)."""

import numpy as np

from bench.stats import paired_bootstrap

RNG = np.random.default_rng(3)
Y = np.r_[np.zeros(3000, bool), np.ones(1000, bool)]


def test_a_clearly_better_filter_wins_every_resample():
    noise = RNG.normal(size=Y.size)
    sharp = Y * 6.0 + noise      # classes 6 sd apart
    blunt = Y * 1.5 + noise      # 1.5 sd apart
    r = paired_bootstrap(Y, sharp, blunt, n_resamples=200)
    for name in ("one_minus_auc_pct", "sm_pct_at_hm_0.1pct"):
        assert r[name]["textnb"] < r[name]["bogofilter"]
        assert r[name]["textnb_better_share"] == 1.0
        assert r[name]["diff_ci95"][1] < 0


def test_the_same_scores_tie_in_every_resample():
    s = Y * 2.0 + RNG.normal(size=Y.size)
    r = paired_bootstrap(Y, s, s.copy(), n_resamples=50)
    for m in r.values():
        assert m["tie_share"] == 1.0 and m["textnb_better_share"] == 0.0
        assert m["diff_ci95"] == [0.0, 0.0]


def test_resamples_keep_the_class_sizes_and_are_reproducible():
    a = Y * 2.0 + RNG.normal(size=Y.size)
    b = Y * 2.0 + RNG.normal(size=Y.size)
    assert paired_bootstrap(Y, a, b, 100, seed=1) == paired_bootstrap(Y, a, b, 100, seed=1)
    # Two equally good filters: the interval straddles 0.
    low, high = paired_bootstrap(Y, a, b, 300)["one_minus_auc_pct"]["diff_ci95"]
    assert low < 0 < high


def test_whole_corpus_folds_extend_the_readme_split():
    """bench/folds.py's hash folds: fold 0 is exactly the README's test split."""
    from bench.folds import fold_of
    from textnb.mail.corpora import is_test

    paths = [f"enron{i % 3 + 1}/{'spam' if i % 2 else 'ham'}/{i:04d}.txt" for i in range(500)]
    folds = [fold_of("enron", p) for p in paths]
    assert set(folds) == {f"hash{i}" for i in range(5)}
    assert [f == "hash0" for f in folds] == [is_test(p) for p in paths]
    assert fold_of("lingspam", "part7/spmsga12.txt") == "part7"
