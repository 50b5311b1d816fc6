"""How wide the review queue's band should be: mail kept for review against mistakes caught.

    python -m bench.review_band [--corpus spamassassin ...] [--json OUT]

The review page (docs/review-page.md) keeps the raw message of every spam verdict
(mail the user may want back) and of every ham verdict within ``REVIEW_BAND`` log-odds
of the threshold (``textnb.review.store``), so that a spam let through by a small
margin can be taught with one click. A wider band catches more of those mistakes and
keeps more mail (bounded by the store's size cap, so a wide band shortens how long
anything stays). Measured on the cells every default is chosen on (hash
cross-validation of each corpus's training part, and chronological validation for the
corpora with dates: bench/select_defaults.py), at the default threshold (log-odds 0):
per band width b, the share of ham verdicts kept (log-odds in (-b, 0]) and the share of
the spams delivered as ham that are among them.
"""

from __future__ import annotations

import sys

import numpy as np

from bench.common import Corpus, corpus_arguments, require_corpora, write_json
from textnb.config import load_config
from textnb.evaluation.cross_validation import (fit_rows, out_of_fold_log_odds, score_rows,
                                                stratified_folds)
from textnb.features.vectorize import binarize
from textnb.mail.corpora import CORPORA

BANDS = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)


def cell_scores(corpus: Corpus, cfg) -> dict:
    """cell -> (labels, log-odds) scored by models that never saw the messages."""
    X, pairs, _ = corpus.matrix(cfg)
    headers, dependence = corpus.header_columns(cfg), corpus.dependence(cfg)
    rows = corpus.hash_train
    y = corpus.y[rows]
    out = {"hash_cv": (y, out_of_fold_log_odds(X[rows], y, cfg.model, cfg.features,
                                               stratified_folds(y, 5), pairs, headers,
                                               dependence))}
    if corpus.chrono is not None:
        fit, valid = corpus.chrono
        model = fit_rows(X, corpus.y, fit, cfg.model, cfg.features, route_columns=headers)
        Xf = binarize(X) if cfg.features.features == "binary" else X
        out["chrono_val"] = (corpus.y[valid],
                             score_rows(model, Xf[valid], cfg.model, pairs, headers,
                                        dependence))
    return out


def band_figures(y: np.ndarray, scores: np.ndarray, threshold: float = 0.0) -> list[dict]:
    ham_verdict = scores <= threshold
    missed = ham_verdict & (y == 1)
    out = []
    for b in BANDS:
        kept = ham_verdict & (scores > threshold - b)
        out.append({"band": b,
                    "ham_verdicts_kept_pct": 100 * kept.sum() / max(ham_verdict.sum(), 1),
                    "missed_spams_caught_pct": 100 * (kept & missed).sum() / max(missed.sum(), 1),
                    "missed_spams": int(missed.sum())})
    return out


def main(argv=None) -> int:
    args = corpus_arguments(__doc__).parse_args(argv)
    require_corpora()
    cfg = load_config(None, {})
    result = {}
    for name in args.corpus or CORPORA:
        for cell, (y, s) in cell_scores(Corpus(name), cfg).items():
            result[f"{name}:{cell}"] = rows = band_figures(y, s)
            print(f"{name}:{cell} ({rows[0]['missed_spams']} spams delivered as ham): " + "  ".join(
                f"b={r['band']:g} keeps {r['ham_verdicts_kept_pct']:.1f}% catches "
                f"{r['missed_spams_caught_pct']:.0f}%" for r in rows), flush=True)
    write_json(args.json, {"bands": BANDS, "cells": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
