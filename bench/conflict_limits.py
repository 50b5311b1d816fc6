"""What any way of adding up the clues could do on the conflicting-labels test, and where
the strict operating point's missed spams come from.

    python -m bench.conflict_limits [--list ilug.linux.ie ...] [--json docs/results/conflict-limits.json]

Part one, the conflicting-labels test (bench/conflicting_labels.py: one list's
advertisements spam in the past, ham in the future; SpamAssassin's chronological
split). A model trained on the past gives every future message its spam side S (the
sum of its selected spam clues, plus the prior) and ham side H. Any rule that adds
clues up sensibly -- the sum, chi-square, Fisher's indicator, a calibration that looks
at both sides -- is increasing in S and decreasing in H; so a relabelled advertisement
outscores, under *every* such rule, each spam with no more spam evidence and no less
ham evidence than it has. The share of the future's spams it dominates that way is a
lower bound on the share it outscores, for the whole family at once. Reported for the
default selection (8 + 8 clues) and for 2 + 2, 16 + 16 and every clue, and at 8 + 8
with the counts changed: each campaign counted about once (bench/campaign_weights.py's
weights, each past message weighted by its near-duplicates of the same class).

Then three learners on the same past, each scoring the future: the sum (today's
scores); a logistic map of (S, H) fitted on the past's out-of-fold sides (the
calibration that looks at both sides, fitted as ``textnb tune`` fits its map: each
past message scored by a model that never saw it); the same map fitted on the future
itself (an oracle: the best a two-sided map could be); and logistic regression over
all the tokens (scikit-learn, L2, C = 0.1, 1, 10), fitted on the past: a learner that
weighs every token jointly, to see what the past's labels allow at all.

Part two, λ = 999 on SpamAssassin's hash test split (the README's): the spams a
threshold must miss to lose no test ham (a look at the test labels: a bound, not a
rule), the spams the tuned threshold misses, and the highest out-of-fold training
ham that the tuned threshold must clear.

docs/conflicting-evidence.md#how-far-any-rule-could-go gives the results.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench.campaign_weights import VARIANTS as CAMPAIGN_VARIANTS
from bench.campaign_weights import campaign_weights, content_columns
from bench.combining_rules import side_totals
from bench.common import dependence_of, require_corpora, write_json
from bench.conflicting_labels import LISTS, conflicting, figures, parts
from bench.list_reader import list_id
from textnb.config import load_config
from textnb.decision import calibration
from textnb.evaluation.cross_validation import (fit_rows, out_of_fold_log_odds, score_rows,
                                                stratified_folds)
from textnb.evaluation.tune import make_folds
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import iter_corpus, split
from textnb.models.dependence import independent_entries, restricted
from textnb.models.evidence import RankedEvidence, header_columns, pair_columns
from textnb.spamfilter import SpamFilter

PLACES = {"2 + 2": 4, "8 + 8 (default)": 16, "16 + 16": 32, "every clue": 0}
LR_C = (0.1, 1.0, 10.0)


class Matrix:
    """Every message's term counts once, with the columns the selection needs."""

    def __init__(self, cfg, raws):
        spam_filter, vocabulary = SpamFilter(cfg), Vocabulary()
        self.X = vocabulary.transform([spam_filter.tokens(r) for r in raws], grow=True)
        self.Xf = binarize(self.X)
        self.pairs = pair_columns(vocabulary.tokens_)
        self.headers = header_columns(vocabulary.tokens_)
        self.dependence = dependence_of(vocabulary, cfg)
        self.cfg = cfg

    def fit(self, y, rows, sample_weight=None):
        return fit_rows(self.X, y.astype(np.int64), rows, self.cfg.model, self.cfg.features,
                        sample_weight)

    def sides(self, model, rows, places: int | None = None):
        """(S + prior, H) of ``rows``: the selected clues' spam and ham totals."""
        m = self.cfg.model
        C, base = model.log_odds_contributions(self.Xf[rows])
        if self.dependence is not None:  # as the filter: dependent clues dropped first
            C = restricted(C, independent_entries(C, self.dependence))[0]
        ranked = RankedEvidence(C, self.pairs, self.headers)
        keep = ranked.kept(m.max_discriminators if places is None else places,
                           m.max_pair_discriminators, True, header_places=m.header_places)
        S, H = side_totals(ranked.values[keep], ranked.rows[keep], ranked.n_rows)
        return S + base, H


def chronological_matrix(cfg):
    """SpamAssassin's chronological split for the conflicting-labels test: each message's
    part, list id and original label, and the term counts (``Matrix``)."""
    part, raw, original = parts("chronological")
    return part, [list_id(r) for r in raw], original, Matrix(cfg, raw)


def dominated(S, H, y, moved) -> dict:
    """The bound: per relabelled ham, the share of spams with S <= its S and H >= its H
    (the worst and the median, in %), and the sum's own figures beside it."""
    spam = np.flatnonzero(y)
    bound = [float(np.mean((S[spam] <= S[i]) & (H[spam] >= H[i]))) for i in np.flatnonzero(moved)]
    return {"worst_pct": round(100 * max(bound), 2),
            "median_pct": round(100 * float(np.median(bound)), 2),
            "over_1pct": sum(b > 0.01 for b in bound), "sum": figures(y, S - H, moved)}


def logistic(Z, y, C: float = 1e4, **options):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, **{"max_iter": 5000, **options}).fit(Z, y)


def conflict_limits(matrix: Matrix, part, ids, original, changed: str) -> dict | None:
    y, moved = conflicting(ids, part, original, changed)
    past, future = np.flatnonzero(part == "past"), np.flatnonzero(part == "test")
    if not moved[future].any():
        return None
    yf, mf = y[future], moved[future]
    model = matrix.fit(y, past)
    out = {"relabelled": int(mf.sum()), "dominance_bound": {}, "learners": {}}
    for name, places in PLACES.items():
        out["dominance_bound"][name] = dominated(*matrix.sides(model, future, places), yf, mf)
    content = content_columns(matrix.headers, matrix.X.shape[1])
    for name, spec in ((n, v) for n, v in CAMPAIGN_VARIANTS.items() if v is not None):
        weights = campaign_weights(matrix.X, y.astype(np.int64), past, content, spec)
        out["dominance_bound"][f"8 + 8, campaigns weighted: {name}"] = dominated(
            *matrix.sides(matrix.fit(y, past, weights), future), yf, mf)
    S, H = matrix.sides(model, future)
    learners = out["learners"]
    learners["sum"] = figures(yf, S - H, mf)
    past_sides = np.zeros((len(part), 2))
    for fold in stratified_folds(y[past], 5):
        test = past[fold]
        past_sides[test] = np.c_[matrix.sides(matrix.fit(y, np.setdiff1d(past, test)), test)]
    fitted = logistic(past_sides[past], y[past])
    learners["two-sided map, fitted on the past"] = {
        **figures(yf, fitted.decision_function(np.c_[S, H]), mf),
        "coefficients_S_H": fitted.coef_[0].round(4).tolist()}
    oracle = logistic(np.c_[S, H], yf)
    learners["two-sided map, fitted on the future (oracle)"] = {
        **figures(yf, oracle.decision_function(np.c_[S, H]), mf),
        "coefficients_S_H": oracle.coef_[0].round(4).tolist()}
    for C in LR_C:
        lr = logistic(matrix.Xf[past], y[past], C, solver="liblinear", max_iter=1000)
        learners[f"logistic regression on tokens, C={C:g}"] = figures(
            yf, lr.decision_function(matrix.Xf[future]), mf)
    return out


def strict_point(cfg) -> dict:
    """λ = 999 on SpamAssassin's hash test split: the bound and the tuned threshold."""
    train, test = split(iter_corpus("spamassassin"))
    matrix = Matrix(cfg, [e.raw for e in train + test])
    y = np.array([e.label == "spam" for e in train + test])
    rows, tested = np.arange(len(train)), np.arange(len(train), len(y))
    oof = out_of_fold_log_odds(matrix.X[rows], y[rows], cfg.model, cfg.features,
                               make_folds(y[rows], 5), matrix.pairs, matrix.headers,
                               matrix.dependence)
    scores = score_rows(matrix.fit(y, rows), matrix.Xf[tested], cfg.model, matrix.pairs,
                        matrix.headers, matrix.dependence)
    threshold = calibration.log_odds_threshold(calibration.fit(oof, y[rows]), 999)
    spam, ham = scores[y[tested]], scores[~y[tested]]
    return {"test_spams": int(spam.size), "test_hams": int(ham.size),
            "highest_out_of_fold_training_ham": round(float(oof[~y[rows]].max()), 2),
            "tuned_threshold": round(float(threshold), 2),
            "tuned_fp": int((ham > threshold).sum()), "tuned_fn": int((spam <= threshold).sum()),
            "highest_test_ham": round(float(ham.max()), 2),
            "fn_at_zero_fp_bound": int((spam <= ham.max()).sum())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="append", dest="lists")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    require_corpora()
    cfg = load_config(None, {})
    part, ids, original, matrix = chronological_matrix(cfg)
    results = {}
    for changed in args.lists or LISTS:
        r = conflict_limits(matrix, part, ids, original, changed)
        if r is None:
            print(f"{changed}: no advertisement of it in the future; skipped")
            continue
        results[changed] = r
        print(f"{changed} ({r['relabelled']} relabelled): share of spams the worst one "
              "dominates (S no lower, H no higher), a bound for every monotone rule:")
        for name, b in r["dominance_bound"].items():
            print(f"  {name:<40} bound worst {b['worst_pct']:6.2f}% median {b['median_pct']:6.2f}% "
                  f"({b['over_1pct']} over 1%); the sum: worst "
                  f"{b['sum']['worst_spams_outscored_pct']:.2f}%")
        for name, f in r["learners"].items():
            print(f"  {name:<46} worst {f['worst_spams_outscored_pct']:6.2f}% median "
                  f"{f['median_spams_outscored_pct']:6.2f}%, (1-AUC)% {f['one_minus_auc_pct']:.3f}, "
                  f"sm%@hm0.1% {f['sm_pct_at_hm_0.1pct']:.2f}"
                  + (f"  coef {f['coefficients_S_H']}" if "coefficients_S_H" in f else ""),
                  flush=True)
    strict = strict_point(cfg)
    print("SpamAssassin hash test split, λ = 999: " + ", ".join(f"{k} {v}" for k, v in strict.items()))
    write_json(args.json, {"conflicting_labels": results, "strict_point": strict})
    return 0


if __name__ == "__main__":
    sys.exit(main())
