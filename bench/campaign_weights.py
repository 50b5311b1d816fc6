"""A spam campaign counted as one piece of evidence: near-duplicate training messages weighted.

    python -m bench.campaign_weights [--corpus spamassassin ...] [--no-conflict] [--test]
        [--json OUT]

Naive Bayes counts every training message as an independent observation. A campaign
sends hundreds of near-identical copies, so its words reach counts like 484 spams / 0
hams and log-likelihood ratios of +8, and eight of them outweigh any ham evidence a
message also carries (a mailing list's advertisement: docs/conflicting-evidence.md).
Here each class's training messages are linked when the Jaccard similarity of their
content tokens (header-field tokens left out; tokens in one message only or in more than
5% of the class left out, so that the comparison is of what makes a message itself) is
at least tau, and weighted before counting (Lidstone smoothing is unchanged; the counts
become weighted sums):

- ``cluster tau``: weight 1/n for a message in a linked group of n (connected
  components): a campaign counts as one message. It needs the whole training set at
  once, so learning one message would change the weights of those learned before.
- ``sequential tau``: weight 1/(1 + k), k the number of messages of its class already
  learned that it is linked to: a campaign of n counts as about ln n + 0.58. A pure
  function of the order of learning, so learning one message at a time gives the same
  counts as a batch in the same order, and forgetting subtracts the weight it was
  learned with.

Judged as the defaults are: the six cells of bench/select_defaults.py (hash
cross-validation and chronological validation) and the conflicting-labels test of
bench/conflicting_labels.py (both splits). ``--test`` also scores the test parts of the
hash and chronological splits once, for the rule that a default leaves no public figure
worse beyond its bootstrap interval (a paired stratified bootstrap of each variant against
none, bench/stats.py). The results and what was decided are in
docs/conflicting-evidence.md#campaigns-counted-once-measured-not-built.
"""

from __future__ import annotations

import sys

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from bench.common import corpus_arguments, dependence_of, require_corpora, write_json
from bench.conflicting_labels import LISTS, conflicting, figures, parts
from bench.list_reader import list_id
from bench.select_defaults import Corpus, geometric_mean
from bench.stats import paired_bootstrap
from textnb.config import load_config
from textnb.evaluation.cross_validation import fit_rows, score_rows, stratified_folds
from textnb.evaluation.metrics import one_minus_auc_pct, sm_at_hm
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import CORPORA, chronological_split, iter_corpus
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter

# What makes a message itself: tokens in more than this share of its class are left out
# of the similarity (greetings, "click here", the list footer).
MAX_SHARE = 0.05
VARIANTS = {"none": None, "cluster 0.5": ("cluster", 0.5), "cluster 0.8": ("cluster", 0.8),
            "sequential 0.5": ("sequential", 0.5), "sequential 0.8": ("sequential", 0.8)}


def linked_pairs(B: sp.csr_matrix, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) with i < j for rows whose content-token Jaccard similarity is >= tau."""
    B = sp.csr_matrix(B, dtype=np.float32)
    B.data[:] = 1
    df = np.bincount(B.indices, minlength=B.shape[1])
    B = B[:, (df >= 2) & (df <= max(2, MAX_SHARE * B.shape[0]))]
    size = np.asarray(B.sum(axis=1)).ravel()
    shared = (B @ B.T).tocoo()
    upper = shared.row < shared.col
    i, j, n = shared.row[upper], shared.col[upper], shared.data[upper]
    linked = n / np.maximum(size[i] + size[j] - n, 1) >= tau
    return i[linked], j[linked]


def campaign_weights(X: sp.csr_matrix, y: np.ndarray, rows: np.ndarray, content: np.ndarray,
                     variant) -> np.ndarray:
    """Training weight of each of ``rows`` (in learning order) under ``variant``."""
    w = np.ones(rows.size)
    if variant is None:
        return w
    kind, tau = variant
    for cls in (0, 1):
        of_class = np.flatnonzero(y[rows] == cls)
        n = of_class.size
        i, j = linked_pairs(X[rows[of_class]][:, content], tau)
        if kind == "cluster":
            graph = sp.coo_matrix((np.ones(i.size), (i, j)), shape=(n, n))
            group = connected_components(graph, directed=False)[1]
            w[of_class] = 1.0 / np.bincount(group)[group]
        else:  # j is learned after i, so i is one of j's earlier near-duplicates
            w[of_class] = 1.0 / (1.0 + np.bincount(j, minlength=n))
    return w


def content_columns(headers: np.ndarray | None, n: int) -> np.ndarray:
    return np.arange(n) if headers is None else np.flatnonzero(~headers)


def cells(name: str, cfg) -> dict:
    """variant -> {cell: ((1-AUC)%, sm% at hm 0.1%)} for one corpus."""
    corpus = Corpus(name)
    X, pairs, _ = corpus.matrix(cfg)
    headers, dependence = corpus.header_columns(cfg), corpus.dependence(cfg)
    content = content_columns(headers, X.shape[1])
    Xf, y = (binarize(X) if cfg.features.features == "binary" else X), corpus.y
    rows = corpus.hash_train
    splits = {"hash_cv": [(np.setdiff1d(rows, rows[f]), rows[f])
                          for f in stratified_folds(y[rows], 5)]}
    if corpus.chrono is not None:
        splits["chrono_val"] = [corpus.chrono]
    out: dict = {}
    for kind, folds in splits.items():
        for variant, spec in VARIANTS.items():
            scored, scores = [], []
            for train, test in folds:
                model = fit_rows(X, y, train, cfg.model, cfg.features,
                                 campaign_weights(X, y, train, content, spec))
                scores.append(score_rows(model, Xf[test], cfg.model, pairs, headers, dependence))
                scored.append(test)
            s, r = np.concatenate(scores), np.concatenate(scored)
            out.setdefault(variant, {})[f"{name}:{kind}"] = (one_minus_auc_pct(y[r], s),
                                                              sm_at_hm(y[r], s))
    return out


def test_parts(name: str, cfg, resamples: int = 1000) -> dict:
    """split -> variant -> the test part's figures and the bootstrap interval against none."""
    corpus = Corpus(name)
    X, pairs, _ = corpus.matrix(cfg)
    headers, dependence = corpus.header_columns(cfg), corpus.dependence(cfg)
    content = content_columns(headers, X.shape[1])
    Xf, y = (binarize(X) if cfg.features.features == "binary" else X), corpus.y
    splits = {"hash": (corpus.hash_train, np.setdiff1d(np.arange(y.size), corpus.hash_train))}
    if corpus.chrono is not None:
        examples = list(iter_corpus(name))
        row = {e.relpath: i for i, e in enumerate(examples)}
        train, test = chronological_split(name, examples)
        splits["chronological"] = (np.array([row[e.relpath] for e in train]),
                                   np.array([row[e.relpath] for e in test]))
    out: dict = {}
    for split, (train, test) in splits.items():
        scores = {}
        for variant, spec in VARIANTS.items():
            model = fit_rows(X, y, train, cfg.model, cfg.features,
                             campaign_weights(X, y, train, content, spec))
            scores[variant] = score_rows(model, Xf[test], cfg.model, pairs, headers, dependence)
        out[split] = {variant: {metric: {"value": r["textnb"], "diff_ci95": r["diff_ci95"]}
                                for metric, r in paired_bootstrap(
                                    y[test], s, scores["none"], resamples).items()}
                      for variant, s in scores.items()}
    return out


def conflict_test(cfg, split: str) -> dict:
    """variant -> list -> figures of bench.conflicting_labels (trained on the past only)."""
    part, raw, original = parts(split)
    ids = [list_id(r) for r in raw]
    vocabulary = Vocabulary()
    spam_filter = SpamFilter(cfg)
    X = vocabulary.transform([spam_filter.tokens(r) for r in raw], grow=True)
    pairs, headers = pair_columns(vocabulary.tokens_), header_columns(vocabulary.tokens_)
    dependence = dependence_of(vocabulary, cfg)
    content = content_columns(headers, X.shape[1])
    Xf = binarize(X) if cfg.features.features == "binary" else X
    past, future = np.flatnonzero(part != "test"), np.flatnonzero(part == "test")
    out: dict = {}
    for changed in LISTS:
        y, moved = conflicting(ids, part, original, changed)
        if not moved[future].any():
            continue
        y = y.astype(np.int64)
        for variant, spec in VARIANTS.items():
            model = fit_rows(X, y, past, cfg.model, cfg.features,
                             campaign_weights(X, y, past, content, spec))
            s = score_rows(model, Xf[future], cfg.model, pairs, headers, dependence)
            out.setdefault(variant, {})[changed] = figures(y[future].astype(bool), s,
                                                           moved[future])
    return out


def main(argv=None) -> int:
    parser = corpus_arguments(__doc__)
    parser.add_argument("--no-conflict", action="store_true")
    parser.add_argument("--test", action="store_true",
                        help="also score the test parts once (paired bootstrap against none)")
    args = parser.parse_args(argv)
    require_corpora()
    cfg = load_config(None, {})
    table: dict = {}
    for name in args.corpus or CORPORA:
        for variant, by_cell in cells(name, cfg).items():
            table.setdefault(variant, {}).update(by_cell)
        print(f"{name}: done", file=sys.stderr, flush=True)
    result = {"max_share": MAX_SHARE, "variants": []}
    for variant, by_cell in table.items():
        row = {"variant": variant,
               "cells": {k: {"one_minus_auc_pct": a, "sm_pct_at_hm_0.1pct": b}
                         for k, (a, b) in by_cell.items()},
               "gmean_one_minus_auc_pct": geometric_mean([a for a, _ in by_cell.values()]),
               "gmean_sm_pct_at_hm_0.1pct": geometric_mean([b for _, b in by_cell.values()])}
        result["variants"].append(row)
        print(f"{variant:<16} gmean {row['gmean_one_minus_auc_pct']:.4f} / "
              f"{row['gmean_sm_pct_at_hm_0.1pct']:.2f}  | " + "  ".join(
                  f"{k}={a:.3f}/{b:.2f}" for k, (a, b) in by_cell.items()), flush=True)
    if not args.no_conflict:
        result["conflicting_labels"] = {}
        for split in ("chronological-validation", "chronological"):
            by_variant = conflict_test(cfg, split)
            result["conflicting_labels"][split] = by_variant
            for variant, lists in by_variant.items():
                print(f"{split:<25} {variant:<16} " + "  ".join(
                    f"{lst}: worst {f['worst_spams_outscored_pct']:.1f}% median "
                    f"{f['median_spams_outscored_pct']:.1f}%" for lst, f in lists.items()),
                    flush=True)
    if args.test:
        result["test_parts"] = {}
        for name in args.corpus or CORPORA:
            result["test_parts"][name] = by_split = test_parts(name, cfg)
            for split, by_variant in by_split.items():
                for variant, m in by_variant.items():
                    print(f"test {name}:{split:<14} {variant:<16} " + "  ".join(
                        f"{metric} {r['value']:.3f} (diff 95% [{r['diff_ci95'][0]:+.3f}, "
                        f"{r['diff_ci95'][1]:+.3f}])" for metric, r in m.items()), flush=True)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
