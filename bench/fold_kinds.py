"""Blocks or the past only: which out-of-fold scores the tuned map is fitted on, measured
by the cost on a real mailbox's next messages.

    python -m bench.fold_kinds [--cache /tmp/evidence-cache] [--no-bogofilter] [--json OUT]

``textnb tune --chronological`` gives every training message a score from a model of the
other four of five delivery-order blocks (later mail included), fits the isotonic map on
those scores and thresholds at λ. A filter in use only scores mail newer than what it
learned, so this script also fits the map on forward-chaining scores (each block scored
by a model of the blocks before it, the first block unscored) and on both sets pooled,
and applies each map's thresholds to the next messages of trec07p-early (the corpora's
one real mailbox), for the windows of ``bench.dependent_evidence`` and its later tenths.
Reported per window and kind: FP, FN and cost λ·FP + FN at λ = 1, 9 and 999, with
bogofilter's own verdicts (its default cutoffs; unsure counts as not spam) on the same
files. The results: docs/design/calibration.md. Aggregate figures only, as the mailbox's
terms require.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from bench.common import write_json
from bench.token_cache import (DEFAULT_CACHE, TREC, Columns, bogofilter_window, cost_at,
                               matrix, rolling_windows, tokenised, windows)
from textnb.config import load_config
from textnb.decision import calibration as cal
from textnb.evaluation.cross_validation import chronological_folds, fit_rows
from textnb.features.vectorize import binarize
from textnb.mail.corpora import corpora_root

LAMBDAS = (1.0, 9.0, 999.0)
N_FOLDS = 5  # tune's default


def fold_scores(X, Xb, y, a: int, columns: Columns, cfg) -> dict[str, tuple]:
    """(scores, labels) of the first ``a`` messages for each kind of out-of-fold score."""
    folds = chronological_folds(a, N_FOLDS)

    def scored(train, rows):
        model = fit_rows(X, y, train, cfg.model, cfg.features,
                         route_columns=columns.headers)
        return columns.score(model, Xb[rows], cfg)

    blocks = np.empty(a)
    for f in folds:
        blocks[f] = scored(np.setdiff1d(np.arange(a), f), f)
    past_rows = np.concatenate(folds[1:])
    past = np.concatenate([scored(np.concatenate(folds[:j]), folds[j])
                           for j in range(1, N_FOLDS)])
    return {"blocks": (blocks, y[:a]),
            "past only": (past, y[past_rows]),
            "both": (np.concatenate([blocks, past]), np.concatenate([y[:a], y[past_rows]]))}


def run_window(corpus: dict, a: int, b: int, bogofilter: bool) -> dict:
    y = corpus["labels"][:b].astype(np.int64)
    X, tokens = matrix(corpus, np.arange(b))
    Xb = binarize(X)
    columns = Columns(tokens)
    cfg = load_config(None, {})
    model = fit_rows(X, y, np.arange(a), cfg.model, cfg.features,
                     route_columns=columns.headers)
    test = columns.score(model, Xb[a:], cfg)
    spam = y[a:].astype(bool)
    out = {"n_train": a, "n_test": b - a, "kinds": {}}
    for kind, (scores, labels) in fold_scores(X, Xb, y, a, columns, cfg).items():
        calibration = cal.fit(scores, labels)
        row = {}
        for lam in LAMBDAS:
            row[f"lambda_{lam:g}"] = cost_at(spam, test, cal.log_odds_threshold(calibration, lam),
                                             lam)
        out["kinds"][kind] = row
    if bogofilter:
        out["bogofilter"] = bogofilter_window(corpus, a, b)["own_verdict"]
    return out


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--no-bogofilter", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    bogofilter = not args.no_bogofilter and shutil.which("bogofilter") is not None
    corpus = tokenised(TREC, args.cache)
    n = len(corpus["keys"])
    result = {}
    for label, a, b in windows(n) + rolling_windows(n):
        result[label] = run_window(corpus, a, b, bogofilter)
        costs = {kind: "/".join(f"{row[f'lambda_{lam:g}']['cost']:g}" for lam in LAMBDAS)
                 for kind, row in result[label]["kinds"].items()}
        print(f"{label}: {costs} bogofilter {result[label].get('bogofilter')}",
              file=sys.stderr, flush=True)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
