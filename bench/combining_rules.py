"""Ways to add up a message's clues when they point both ways, judged as the defaults are.

    python -m bench.combining_rules [--corpus spamassassin ...] [--json OUT]

A message whose spam clues and ham clues are both strong (a mailing list's
advertisement: the ad's words on one side, the list's own header fields on the other)
is scored by naive Bayes as the difference of the two sums, where bogofilter's Fisher
combining puts it in the middle ("unsure"). This runs the candidate rules over the
same selected clues (textnb's default selection: 8 + 8, at most 3 pairs a side, 2
header places a side) on the cells the defaults are chosen on (bench/select_defaults.py:
hash cross-validation of each corpus's training part and, for SpamAssassin and Enron
1-3, chronological validation inside it), and reports (1-AUC)% and sm% at hm 0.1% per
cell with their geometric means. The rules, with S and H the spam and ham sides'
totals (S = sum of the positive log-likelihood ratios, H = minus that of the negative):

- ``sum``: S - H, naive Bayes (the default);
- ``chi-square``: Fisher's log-ratio of the two tails (textnb.models.combining, an option);
- ``fisher``: the logit of bogofilter's and SpamBayes' indicator (1 + Q_H - Q_S) / 2,
  computed in log space so that it has no ties; over the selected clues, and over
  every clue stronger than |LLR| 2 (bogofilter's way: every token not near 0.5);
- ``bounded L``: each side's total bounded softly at L (a side's evidence trusted
  up to odds e^L: -ln((1 - e^-L) e^-x + e^-L));
- ``ratio a``: a ln(1 + S/a) - a ln(1 + H/a), the two totals compressed, so that
  large totals on both sides give a smaller score than their difference;
- ``min(sum, fisher)``: spam only as far as both rules say so;
- ``logistic``: a logistic regression of the label on (S - H, min(S, H)), fitted on the
  other folds' totals (the calibration that "looks at both sides"; hash CV cells only,
  beside the sum on the same cells).

docs/conflicting-evidence.md gives the results and what was chosen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.special import gammaln

from bench.select_defaults import Corpus, geometric_mean
from textnb.config import load_config
from textnb.evaluation.cross_validation import fit_rows, stratified_folds
from textnb.evaluation.metrics import one_minus_auc_pct, sm_at_hm
from textnb.features.vectorize import binarize
from textnb.mail.corpora import CORPORA, corpora_root
from textnb.models import combining
from textnb.models.evidence import RankedEvidence


def side_totals(values, rows, n_rows):
    """(S, H): per row, the sum of the positive clues and minus that of the negative."""
    S = np.bincount(rows, weights=np.where(values > 0, values, 0.0), minlength=n_rows)
    H = -np.bincount(rows, weights=np.where(values < 0, values, 0.0), minlength=n_rows)
    return S, H


def _log_q(m, n):
    """ln Q(2m, 2n): the chi-square survival function with 2n degrees of freedom at 2m."""
    return -m + combining._log_poisson_cdf_terms(m, n.astype(np.int64))


def _log_p(m, n, terms: int = 200):
    """ln (1 - Q(2m, 2n)), by the lower incomplete gamma's series where it is small."""
    out = np.empty_like(m)
    small = m < n + 10 * np.sqrt(n) + 5
    ms, ns = m[small], n[small]
    with np.errstate(divide="ignore"):
        lead = ns * np.log(ms) - ms - gammaln(ns + 1)
    term, total = np.ones_like(ms), np.ones_like(ms)
    for k in range(1, terms):
        term = term * ms / (ns + k)
        total += term
    out[small] = lead + np.log(total)
    out[~small] = np.log1p(-np.exp(_log_q(m[~small], n[~small])))
    return out


def fisher(values, rows, n_rows):
    """logit((1 + Q_H - Q_S) / 2), Robinson's S and H from each clue's f = expit(LLR)."""
    S = np.bincount(rows, weights=np.logaddexp(0.0, values), minlength=n_rows)
    H = np.bincount(rows, weights=np.logaddexp(0.0, -values), minlength=n_rows)
    n = np.bincount(rows, minlength=n_rows).astype(float)
    out, has = np.zeros(n_rows), n > 0
    S, H, n = S[has], H[has], n[has]
    out[has] = (np.logaddexp(_log_q(H, n), _log_p(S, n))
                - np.logaddexp(_log_p(H, n), _log_q(S, n)))
    return out


def bounded(L):
    def rule(values, rows, n_rows):
        S, H = side_totals(values, rows, n_rows)
        g = lambda x: -np.logaddexp(np.log1p(-np.exp(-L)) - x, -L)  # noqa: E731
        return g(S) - g(H)
    return rule


def ratio(a):
    def rule(values, rows, n_rows):
        S, H = side_totals(values, rows, n_rows)
        return a * np.log1p(S / a) - a * np.log1p(H / a)
    return rule


def plain(values, rows, n_rows):
    return np.bincount(rows, weights=values, minlength=n_rows)


def chi_square(values, rows, n_rows):
    return combining.combine(values, rows, n_rows, "chi-square")


EVERY_CLUE = {"k": 0, "min_strength": 2.0}


def rules(m) -> dict:
    """name -> (selection keywords of RankedEvidence.kept, rule)."""
    default = {"k": m.max_discriminators, "max_limited": m.max_pair_discriminators,
               "each_side": True, "header_places": m.header_places}
    return {"sum": (default, plain), "chi-square": (default, chi_square),
            "fisher, selected clues": (default, fisher),
            "fisher, every |LLR| > 2": (EVERY_CLUE, fisher),
            **{f"bounded L={L}": (default, bounded(L)) for L in (10, 20, 30)},
            **{f"ratio a={a}": (default, ratio(a)) for a in (10, 20, 40)}}


def cell_parts(corpus: Corpus, cfg, kind: str):
    """(RankedEvidence, baseline, rows) per part of one cell."""
    X, pairs, _ = corpus.matrix(cfg)
    headers = corpus.header_columns(cfg)
    Xf = binarize(X)
    if kind == "hash_cv":
        rows = corpus.hash_train
        parts = [(np.setdiff1d(rows, rows[f]), rows[f])
                 for f in stratified_folds(corpus.y[rows], 5)]
    else:
        parts = [corpus.chrono]
    out = []
    for train, test in parts:
        model = fit_rows(X, corpus.y, train, cfg.model, cfg.features)
        C, base = model.log_odds_contributions(Xf[test])
        out.append((RankedEvidence(C, pairs, headers), base, test))
    return out


def scores_of(parts, selection, rule) -> tuple[np.ndarray, np.ndarray]:
    rows, scores = [], []
    for ranked, base, test in parts:
        keep = ranked.kept(**selection)
        scores.append(base + rule(ranked.values[keep], ranked.rows[keep], ranked.n_rows))
        rows.append(test)
    return np.concatenate(rows), np.concatenate(scores)


def stacked_logistic(parts, y, selection) -> tuple[np.ndarray, np.ndarray, list]:
    """Each part scored by a logistic map of (S - H + prior, min(S, H)) fitted on the other
    parts' totals: (rows, scores, the first map's coefficients)."""
    from sklearn.linear_model import LogisticRegression

    feats = []
    for ranked, base, test in parts:
        keep = ranked.kept(**selection)
        S, H = side_totals(ranked.values[keep], ranked.rows[keep], ranked.n_rows)
        feats.append(np.c_[S - H + base, np.minimum(S, H)])
    rows, scores, first = [], [], None
    for i, (_, _, test) in enumerate(parts):
        others = [j for j in range(len(parts)) if j != i]
        fit = LogisticRegression(max_iter=1000).fit(
            np.vstack([feats[j] for j in others]), np.concatenate([y[parts[j][2]] for j in others]))
        first = fit.coef_[0].round(4).tolist() if first is None else first
        rows.append(test)
        scores.append(fit.decision_function(feats[i]))
    return np.concatenate(rows), np.concatenate(scores), first


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    cfg = load_config(None, {})
    table: dict[str, dict] = {}
    coefficients = {}
    for name in args.corpus or CORPORA:
        corpus = Corpus(name)
        for kind in ("hash_cv", "chrono_val") if corpus.chrono is not None else ("hash_cv",):
            parts = cell_parts(corpus, cfg, kind)
            y = corpus.y
            for rule_name, (selection, rule) in rules(cfg.model).items():
                rows, s = scores_of(parts, selection, rule)
                table.setdefault(rule_name, {})[f"{name}:{kind}"] = (
                    one_minus_auc_pct(y[rows], s), sm_at_hm(y[rows], s))
            if kind == "hash_cv":  # the stacked map needs folds to fit on
                rows, s, coefficients[name] = stacked_logistic(parts, y, rules(cfg.model)["sum"][0])
                table.setdefault("logistic (hash CV only)", {})[f"{name}:{kind}"] = (
                    one_minus_auc_pct(y[rows], s), sm_at_hm(y[rows], s))
                table.setdefault("sum (hash CV only)", {})[f"{name}:{kind}"] = \
                    table["sum"][f"{name}:{kind}"]
            print(f"{name} {kind}: done", file=sys.stderr, flush=True)
    out = []
    for rule_name, cells in table.items():
        row = {"rule": rule_name, "cells": {k: {"one_minus_auc_pct": a, "sm_pct_at_hm_0.1pct": b}
                                            for k, (a, b) in cells.items()},
               "gmean_one_minus_auc_pct": geometric_mean([a for a, _ in cells.values()]),
               "gmean_sm_pct_at_hm_0.1pct": geometric_mean([b for _, b in cells.values()])}
        out.append(row)
        print(f"{rule_name:<30} gmean {row['gmean_one_minus_auc_pct']:.4f} / "
              f"{row['gmean_sm_pct_at_hm_0.1pct']:.2f}  | " + "  ".join(
                  f"{k}={a:.3f}/{b:.2f}" for k, (a, b) in cells.items()), flush=True)
    print("logistic coefficients (S - H, min(S, H)), first fold: " + json.dumps(coefficients))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"rules": out, "logistic_coefficients": coefficients},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
