"""A third verdict: what 'unsure' saves when a person's look has a cost, against bogofilter.

    python -m bench.review_cost [--corpus spamassassin --corpus enron] [--json OUT]

textnb's three-way rule (``decision.review_cost`` = c, in units of a spam let through):
a message is unsure where a person's look costs less than either verdict's expected
cost, c < P(spam) < 1 - c/λ on the calibrated P(spam) (Chow's reject rule,
textnb/decision/costs.py). As bench/tune_costs.py does: the calibration from 5-fold
cross-validation on the hash split's training part, the test part scored once by a
model trained on the whole training part. Per λ (1, 9, 999) and c (``REVIEW_COSTS``):
the test's FP, FN, unsure and cost λ·FP + FN + c·unsure, beside the two-way tuned rule
(c = 0) and bogofilter 1.2.5 at its default cutoffs with its Unsure verdicts costed the
same c; and the held-out cost on the training part (each fold decided by a map fitted on
the others), the estimate `textnb tune --review-cost` prints. Results:
docs/accuracy.md#a-third-verdict-unsure.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.common import corpus_arguments, require_corpora, split_matrix, write_json
from textnb.config import load_config
from textnb.decision import calibration as cal
from textnb.evaluation.cross_validation import fit_rows, out_of_fold_log_odds, score_rows
from textnb.evaluation.tune import (DEFAULT_COST_RATIOS, cross_fitted, cross_fitted_review,
                                    fold_maps, make_folds, operating_point, review_point)
from textnb.features.vectorize import binarize
from textnb.spamfilter import SpamFilter

# A look at a message costs a tenth, a fifth or half of a spam in the inbox, or 2% of it
# (an admin skimming a quarantine list).
REVIEW_COSTS = (0.02, 0.05, 0.1, 0.2, 0.5)


def bogofilter_verdicts(name: str):
    from bench import peers

    with tempfile.TemporaryDirectory(prefix=f"textnb-review-cost-{name}-") as tmp:
        split = peers.write_split(name, Path(tmp))
        run = peers.run_bogofilter(split)
    return split.y_test, run.is_spam_pred, run.is_unsure_pred


def run(name: str, cfg, peer: bool) -> dict:
    spam_filter = SpamFilter(cfg)
    X, y, n_train, _, _ = split_matrix(name, spam_filter)
    pairs, headers = spam_filter.pair_columns(), spam_filter.header_columns()
    dependence = spam_filter.dependence()
    tr, te = np.arange(n_train), np.arange(n_train, len(y))
    folds = make_folds(y[tr], 5)
    oof = out_of_fold_log_odds(X[tr], y[tr], cfg.model, cfg.features, folds, pairs, headers,
                               dependence)
    calibration = cal.fit(oof, y[tr], "isotonic")
    model = fit_rows(X, y, tr, cfg.model, cfg.features, route_columns=headers)
    Xf = binarize(X) if cfg.features.features == "binary" else X
    test = score_rows(model, Xf[te], cfg.model, pairs, headers, dependence)
    y_te = y[te].astype(bool)
    if peer:
        y_peer, spam_peer, unsure_peer = bogofilter_verdicts(name)
        if not np.array_equal(y_peer, y_te):
            raise RuntimeError("bogofilter's test split differs from textnb's")
    maps = fold_maps(y[tr], oof, folds)
    _, flagged = cross_fitted(y[tr], oof, folds, DEFAULT_COST_RATIOS, maps=maps)
    held_out = {c: cross_fitted_review(y[tr], oof, maps, DEFAULT_COST_RATIOS, c)
                for c in REVIEW_COSTS}
    rows = []
    for lam in DEFAULT_COST_RATIOS:
        t = cal.log_odds_threshold(calibration, lam)
        two_way = operating_point(y_te, test, t, lam)
        f = flagged[lam]
        row = {"cost_ratio": lam, "two_way": {k: two_way[k] for k in ("fp", "fn", "cost")},
               "two_way_held_out_cost": float(lam * np.sum(f & (y[tr] == 0))
                                              + np.sum(~f & (y[tr] == 1))),
               "review": {}}
        for c in REVIEW_COSTS:
            between = cal.review_thresholds(calibration, lam, c) or (t, t)  # (t, t): two-way
            cell = review_point(y_te, test, between, lam, c)
            cell["held_out_cost"] = held_out[c][lam]
            if peer:
                fp = int(np.sum(spam_peer & ~y_te))
                fn = int(np.sum(~spam_peer & ~unsure_peer & y_te))
                n_unsure = int(unsure_peer.sum())
                cell["bogofilter"] = {"fp": fp, "fn": fn, "unsure": n_unsure,
                                      "cost": lam * fp + fn + c * n_unsure}
            row["review"][f"{c:g}"] = cell
        rows.append(row)
    return {"corpus": name, "n_test": int(te.size), "n_test_spam": int(y_te.sum()), "rows": rows}


def main(argv=None) -> int:
    parser = corpus_arguments(__doc__, ("spamassassin", "enron"))
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args(argv)
    require_corpora()
    cfg = load_config(None, {})
    results = []
    for name in args.corpus or ("spamassassin", "enron"):
        r = run(name, cfg, not args.no_peer)
        results.append(r)
        print(f"{name}: test {r['n_test']:,} messages, {r['n_test_spam']:,} spam")
        for row in r["rows"]:
            tw = row["two_way"]
            print(f"  λ={row['cost_ratio']:g}: two-way FP/FN {tw['fp']}/{tw['fn']} cost "
                  f"{tw['cost']:g} (held out {row['two_way_held_out_cost']:g})")
            for c, cell in row["review"].items():
                bo = cell.get("bogofilter")
                peer = (f" | bogofilter {bo['fp']}/{bo['fn']}/{bo['unsure']} cost {bo['cost']:.4g}"
                        if bo else "")
                print(f"    c={c:<5} FP/FN/unsure {cell['fp']}/{cell['fn']}/{cell['unsure']} "
                      f"cost {cell['cost']:.4g} (held out {cell['held_out_cost']:.4g}){peer}",
                      flush=True)
    write_json(args.json, {"review_costs": REVIEW_COSTS, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
