"""Tuned cost on every message of a corpus, not one test split: textnb against bogofilter.

    python -m bench.tune_folds [--corpus enron ...] [--search] [--split chronological]
        [--json bench/results/tune-folds.json]

bench/tune_costs.py scores the README's test split once; at λ = 999 one test ham
costs as much as 999 missed spams, so that figure rests on one or two messages.
Here the five folds of the corpora README's hash (``int(md5(relpath), 16) % 5``;
fold 0 is the test split, as in bench/tenfold_parts.py) take turns as the test
set. For each: textnb tunes on the other four folds exactly as ``textnb tune``
does (5-fold out-of-fold log-odds, isotonic map, threshold per λ), trains on them,
and scores the held-out fold; bogofilter trains on the same four folds and gives
its verdicts at its default cutoffs (Unsure delivered, i.e. a ham verdict). The
costs λ·FP + FN of the tuned rule, of the untuned rule (log-odds > ln λ) and of
bogofilter are given per fold and summed over the five. With ``--search`` each fold's
tuning also chooses the settings (``textnb tune --search``, on those four folds only).
``--split chronological`` does the same once on the corpora README's chronological
split: tuned and trained on the past, the latest fifth of each class scored.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from bench.common import dependence_of
from bench import peers
from bench.folds import chronological_parts, load_folds, peer_folds
from textnb.config import load_config
from textnb.decision import calibration as cal
from textnb.evaluation.cross_validation import fit_rows, score_rows
from textnb.evaluation.tune import DEFAULT_COST_RATIOS, describe, make_folds, tune_matrix
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import corpora_root
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter


def cost(y, flagged, lam: float) -> dict:
    fp = int(np.sum(flagged & ~y))
    fn = int(np.sum(~flagged & y))
    return {"fp": fp, "fn": fn, "cost": lam * fp + fn}


def run(corpus: str, cfg, lambdas=DEFAULT_COST_RATIOS, do_search: bool = False,
        log=print, chronological: bool = False) -> dict:
    part, raw, y = chronological_parts(corpus) if chronological else load_folds(corpus)
    part = np.asarray(part)
    spam_filter = SpamFilter(cfg)
    vocab = Vocabulary()
    X = vocab.transform([spam_filter.tokens(r) for r in raw], grow=True)
    pairs, headers = pair_columns(vocab.tokens_), header_columns(vocab.tokens_)
    dependence = dependence_of(vocab, cfg)
    yi = y.astype(np.int64)
    with tempfile.TemporaryDirectory(prefix=f"textnb-tune-folds-{corpus}-") as tmp:
        _, bogo_spam, _ = peer_folds(peers.run_bogofilter, part, raw, y, Path(tmp), corpus)
    folds = []
    for name in sorted(set(part) - {"past"}):  # the past is only trained on
        test, train = np.flatnonzero(part == name), np.flatnonzero(part != name)
        tuned = tune_matrix(X[train], yi[train], cfg, lambdas, make_folds(yi[train], 5),
                            do_search=do_search, pair_columns=pairs,
                            header_columns=headers, dependence=dependence)
        chosen = tuned.config
        model = fit_rows(X, yi, train, chosen.model, chosen.features, route_columns=headers)
        Xc = binarize(X) if chosen.features.features == "binary" else X
        scores = score_rows(model, Xc[test], chosen.model, pairs, headers, dependence)
        row = {"fold": name, "settings": describe(chosen),
               "n_ham": int((~y[test]).sum()), "n_spam": int(y[test].sum()),
               "top_test_hams": np.sort(scores[~y[test]])[::-1][:3].round(1).tolist(),
               "top_oof_ham": float(np.max(tuned.log_odds[yi[train] == 0])), "lambdas": {}}
        for lam in lambdas:
            t = cal.log_odds_threshold(tuned.calibration, lam)
            row["lambdas"][f"{lam:g}"] = {
                "threshold": t if math.isfinite(t) else None,
                "tuned": cost(y[test], scores > t, lam),
                "ln_lambda": cost(y[test], scores > math.log(lam), lam),
                "bogofilter": cost(y[test], bogo_spam[test], lam)}
        folds.append(row)
        log(f"  {corpus} {name} ({row['settings']}): " + "  ".join(
            f"λ={k}: tuned {v['tuned']['cost']:g} ({v['tuned']['fp']}/{v['tuned']['fn']}), "
            f"bogofilter {v['bogofilter']['cost']:g}" for k, v in row["lambdas"].items()))
    totals = {f"{lam:g}": {rule: sum(f["lambdas"][f"{lam:g}"][rule]["cost"] for f in folds)
                           for rule in ("tuned", "ln_lambda", "bogofilter")}
              for lam in lambdas}
    wins = {f"{lam:g}": sum(f["lambdas"][f"{lam:g}"]["tuned"]["cost"]
                            < f["lambdas"][f"{lam:g}"]["bogofilter"]["cost"] for f in folds)
            for lam in lambdas}
    return {"corpus": corpus, "n_ham": int((~y).sum()), "n_spam": int(y.sum()),
            "folds": folds, "totals": totals, "folds_tuned_beats_bogofilter": wins}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=("spamassassin", "enron", "sms"))
    parser.add_argument("--search", action="store_true", help="choose the settings per fold too")
    parser.add_argument("--split", choices=("hash", "chronological"), default="hash",
                        help="five hash folds (default) or the past/latest-fifth split")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "tune-folds.json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    cfg = load_config(None, {})
    results = []
    for corpus in args.corpus or ("spamassassin", "enron"):
        r = run(corpus, cfg, do_search=args.search, chronological=args.split == "chronological")
        results.append(r)
        n = len(r["folds"])
        print(f"{corpus} ({r['n_spam']} spam / {r['n_ham']} ham), cost summed over {n} "
              f"test part{'s' * (n > 1)}:")
        for lam, t in r["totals"].items():
            print(f"  λ={lam:>4}: tuned {t['tuned']:>8g}  ln λ {t['ln_lambda']:>8g}  "
                  f"bogofilter {t['bogofilter']:>8g}  (tuned < bogofilter in "
                  f"{r['folds_tuned_beats_bogofilter'][lam]} of {n})", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"config": "defaults", "searched": args.search,
                                     "split": args.split,
                                     "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
