"""Accuracy of textnb on the shared corpora with the corpora README's hash split.

    python -m bench.accuracy [--corpus spamassassin ...] [--config FILE] [--set k=v ...]
        [--cv 5] [--json OUT]

Tokenises each corpus once (train and test), trains on the train split and
reports the field's metrics on the test split. With --cv K it also reports the
K-fold cross-validated metrics on the training split only (what settings are
chosen by; the test split is for the final table).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench.common import ledger_digests, split_in_order, test_scores, tokenised_split
from textnb.config import load_config, parse_override_value
from textnb.evaluation.cross_validation import out_of_fold_log_odds, stratified_folds
from textnb.evaluation.metrics import summary
from textnb.mail.corpora import CHRONOLOGICAL, CORPORA, corpora_root
from textnb.spamfilter import SpamFilter

KEYS = ("one_minus_auc_pct", "hm_pct", "sm_pct", "sm_pct_at_hm_0.1pct", "fp", "fn")


def run(name: str, cfg, cv: int, chronological: bool = False) -> dict:
    spam_filter = SpamFilter(cfg)
    tokens, y, n_train, tok_seconds = tokenised_split(name, spam_filter, chronological,
                                                      in_delivery_order=True)
    train_rows = np.arange(n_train)
    test_rows = np.arange(n_train, len(y))
    train, test = split_in_order(name, chronological, in_delivery_order=True)
    scores, X, pairs, headers, dependence = test_scores(tokens, y, n_train, cfg,
                                                        ledger_digests(train + test))
    result = {"corpus": name, "n_train": n_train, "n_test": len(test_rows),
              "tokenise_msgs_per_s": round(len(y) / tok_seconds, 1),
              "test": {k: summary(y[test_rows], scores, np.log(cfg.decision.cost_ratio))[k]
                       for k in KEYS}}
    if cv:
        folds = stratified_folds(y[train_rows], cv)
        oof = out_of_fold_log_odds(X[train_rows], y[train_rows], cfg.model, cfg.features, folds,
                                   pairs, headers, dependence, config=cfg)
        result["cv"] = {k: summary(y[train_rows], oof, 0.0)[k] for k in KEYS}
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--cv", type=int, default=0)
    parser.add_argument("--json")
    parser.add_argument("--split", choices=("hash", "chronological"), default="hash",
                        help="the corpora README's hash split, or its split per class by date")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = parse_override_value(value)
    cfg = load_config(args.config, overrides)
    results = []
    chronological = args.split == "chronological"
    for name in args.corpus or (CHRONOLOGICAL if chronological else CORPORA):
        r = run(name, cfg, args.cv, chronological)
        results.append(r)
        cells = "  ".join(f"{k}={r['test'][k]:.3f}" for k in KEYS)
        cvcells = ("  cv: " + "  ".join(f"{k}={r['cv'][k]:.3f}" for k in KEYS[:4])) if args.cv else ""
        print(f"{name:<13} test: {cells}{cvcells}  ({r['tokenise_msgs_per_s']} msg/s tokenise)",
              flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"overrides": overrides, "results": results}, indent=2))


if __name__ == "__main__":
    main()
