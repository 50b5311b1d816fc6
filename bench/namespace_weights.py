"""Per-namespace (and per-side) weights on the selected clues, chosen on training data only.

    python -m bench.namespace_weights [--corpus spamassassin ...] [--json OUT]

Issue 15 asked whether the evidence of a message's namespaces -- body words, word pairs,
the subject, the other header fields (the sender's identity and route), URLs, the rest
(numbers, money, skips, controls) -- should count with different weights, chosen by
cross-validation, and whether the two sides (spam clues, ham clues) should. Still naive
Bayes with Lidstone counts: each selected clue's log-likelihood ratio is multiplied by
its group's weight, so ``explain`` stays a sum.

For every corpus, with the default configuration:

- **hash CV**: the training part of the README's hash split, 5-fold; each message's
  selected clues summed per (group, side) by the model of the other folds. The weights
  are fitted by logistic regression on those out-of-fold sums and judged by a second
  5-fold CV over them (the weights of fold i fitted on the other four), so no weight sees
  the message it scores (stacking, Wolpert 1992).
- **chronological validation** (SpamAssassin, Enron 1-3): the training part of the
  chronological split, split again per class by date; the weights are fitted on the
  out-of-fold sums of the earlier part (5-fold) and applied to the later part's sums from
  the model trained on all the earlier part.

Variants: ``sum`` (naive Bayes: every weight 1), ``sides`` (a weight per side),
``groups`` (a weight per group), ``groups x sides``, and fixed header weights.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from bench.select_defaults import Corpus, geometric_mean
from textnb.config import load_config
from textnb.evaluation.cross_validation import fit_rows, stratified_folds
from textnb.evaluation.metrics import one_minus_auc_pct, sm_at_hm
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import CORPORA, corpora_root
from textnb.models.evidence import strongest

CLIPS = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
GROUPS = ("body", "pair", "subject", "header", "url", "other")
_URL = ("url:", "url-path:", "href:", "href-path:", "email:")
_OTHER = ("num:", "money:", "skip:", "control:", "content:", "attachment:", "script:")


def group_of(token: str) -> int:
    if ":" not in token:
        return 0
    if token.startswith("bi:"):
        return 1
    if token.startswith("subject:"):
        return 2
    if token.startswith(_URL):
        return 4
    if token.startswith(_OTHER):
        return 5
    return 3


def group_sums(model, X, cfg, pairs, groups, headers=None) -> tuple[np.ndarray, float]:
    """Per message, the selected clues' LLRs summed per (group, side): shape (n, 2 G)."""
    m = cfg.model
    C, baseline = model.log_odds_contributions(X)
    C.sort_indices()
    keep = strongest(C, m.max_discriminators, pairs, m.max_pair_discriminators,
                     m.evidence == "each-side", m.min_strength, header=headers,
                     header_places=m.header_places)
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))[keep]
    values = C.data[keep]
    index = groups[C.indices[keep]] * 2 + (values > 0)
    F = np.zeros((C.shape[0], 2 * len(GROUPS) + len(CLIPS)))
    np.add.at(F, (rows, index), values)
    for j, c in enumerate(CLIPS):  # each clue's strength capped at c
        F[:, 2 * len(GROUPS) + j] = np.bincount(rows, np.clip(values, -c, c), C.shape[0])
    return F, baseline


def oof_sums(X, y, rows, cfg, pairs, groups, folds=5, headers=None):
    F = np.zeros((len(rows), 2 * len(GROUPS) + len(CLIPS)))
    base = np.zeros(len(rows))
    Xf = binarize(X) if cfg.features.features == "binary" else X
    yy = y[rows]
    for test in stratified_folds(yy, folds):
        train = np.setdiff1d(np.arange(len(rows)), test)
        model = fit_rows(X, y, rows[train], cfg.model, cfg.features)
        F[test], base[test] = group_sums(model, Xf[rows[test]], cfg, pairs, groups, headers)
    return F, base


def design(F, variant):
    """The inputs a variant weights: columns of F combined."""
    G = len(GROUPS)
    if variant == "sides":
        return np.column_stack([F[:, 1::2].sum(1), F[:, 0::2].sum(1)])
    if variant == "groups":
        return F.reshape(len(F), G, 2).sum(2)
    if variant == "groups x sides":
        return F
    raise ValueError(variant)


def fit_weights(F, y, variant):
    lr = LogisticRegression(C=1e4, max_iter=5000)
    lr.fit(design(F, variant), y)
    return lr


def fixed(F, weight, groups):
    """Each clue of ``groups`` counted ``weight`` times, the others once."""
    w = np.ones(len(GROUPS))
    w[list(groups)] = weight
    return design(F, "groups") @ w


VARIANTS = ["sides", "groups", "groups x sides"]
FIXED = [("header x0.5", 0.5, (3,)), ("header x2", 2.0, (3,)), ("header x3", 3.0, (3,)),
         ("header+url x2", 2.0, (3, 4)), ("pairs x0.5", 0.5, (1,))]


def cells(y, F, base, Ftrain=None, ytrain=None, folds=None):
    """Scores of every variant: stacked by second-level CV (folds) or fitted on
    (Ftrain, ytrain)."""
    G2 = 2 * len(GROUPS)  # F's (group, side) sums; the capped sums follow them
    if Ftrain is not None:
        Ftrain = Ftrain[:, :G2]
    clipped = {f"clip {c:g}": base + F[:, G2 + j] for j, c in enumerate(CLIPS)}
    F = F[:, :G2]
    out = {"sum": base + F.sum(1), **clipped}
    for name, w, groups in FIXED:
        out[name] = base + fixed(F, w, groups)
    weights = {}
    for variant in VARIANTS:
        if folds is not None:
            s = np.zeros(len(y))
            for test in folds:
                train = np.setdiff1d(np.arange(len(y)), test)
                s[test] = fit_weights(F[train], y[train], variant).decision_function(
                    design(F[test], variant))
        else:
            lr = fit_weights(Ftrain, ytrain, variant)
            s = lr.decision_function(design(F, variant))
            weights[variant] = [round(float(v), 3) for v in lr.coef_[0]]
        out[variant] = s
    return {k: {"one_minus_auc_pct": one_minus_auc_pct(y, v),
                "sm_pct_at_hm_0.1pct": sm_at_hm(y, v)} for k, v in out.items()}, weights


def evaluate(corpus: Corpus, cfg) -> dict:
    X, pairs, _ = corpus.matrix(cfg)
    headers = corpus.header_columns(cfg)
    groups = np.fromiter((group_of(t) for t in corpus.tokens_), dtype=np.int64,
                         count=len(corpus.tokens_))
    out = {}
    rows = corpus.hash_train
    y = corpus.y[rows]
    F, base = oof_sums(X, corpus.y, rows, cfg, pairs, groups, headers=headers)
    out["hash_cv"], _ = cells(y, F, base, folds=stratified_folds(y, 5, seed=1))
    if corpus.chrono is not None:
        fit, valid = corpus.chrono
        Ffit, _ = oof_sums(X, corpus.y, fit, cfg, pairs, groups, headers=headers)
        model = fit_rows(X, corpus.y, fit, cfg.model, cfg.features)
        Xf = binarize(X) if cfg.features.features == "binary" else X
        Fv, bv = group_sums(model, Xf[valid], cfg, pairs, groups, headers)
        out["chrono_val"], out["chrono_weights"] = cells(corpus.y[valid], Fv, bv, Ffit,
                                                          corpus.y[fit])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    cfg = load_config(None, {})
    result = {}
    for name in args.corpus or CORPORA:
        corpus = Corpus(name, keep_tokens=True)
        result[name] = evaluate(corpus, cfg)
        for kind, by in result[name].items():
            if kind.endswith("weights"):
                print(f"{name} {kind}: {by}", flush=True)
                continue
            for variant, c in by.items():
                print(f"{name:<14} {kind:<11} {variant:<16} {c['one_minus_auc_pct']:.4f} / "
                      f"{c['sm_pct_at_hm_0.1pct']:.2f}", flush=True)
    names = list(next(iter(result.values()))["hash_cv"])
    summary = {}
    for variant in names:
        cs = [by[variant] for r in result.values() for k, by in r.items()
              if not k.endswith("weights")]
        summary[variant] = (geometric_mean([c["one_minus_auc_pct"] for c in cs]),
                            geometric_mean([c["sm_pct_at_hm_0.1pct"] for c in cs]))
        print(f"gmean {variant:<16} {summary[variant][0]:.4f} / {summary[variant][1]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cells": result, "gmean": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
