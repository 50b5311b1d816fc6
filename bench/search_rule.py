"""How ``tune --search`` chooses, judged on the next messages: each rule's choice per λ.

    python -m bench.search_rule [--cell NAME ...] [--json docs/results/search-rule.json]

For each cell, every setting of the search grid and the model's own
(``textnb.evaluation.tune.SEARCH_GRID``) is scored out of fold on the training part, as
``textnb tune --search`` scores it (5 folds: contiguous blocks in delivery order, or
stratified on the hash split; each setting learning the rows the defaults' training
regime selects, as the search does), which gives its held-out cost per λ and its out-of-fold
(1-AUC)%. Then each setting is trained on the whole training part, calibrated on its
out-of-fold scores (``tune --write``'s map) and scores the test part at its threshold
for each λ. Each rule then chooses, per λ, as ``textnb tune -r λ --search`` would, and
the cost λ·FP + FN of its choice on the test part is reported:

- ``least-cost``: the least held-out cost;
- ``ranking-guard x``: the least held-out cost among the settings whose out-of-fold
  (1-AUC)% is at most x times the least (the default rule at
  ``RANKING_TOLERANCE``).

Cells: the real mailbox (trec07p-early, in delivery order: the first 40 % -> the next
20 %, the first 60 % -> the next 20 %, the first 15,084 -> the next 7,542, its only
split allowed: delivery order) and SpamAssassin's hash and chronological splits (the
corpora README's). The figures are aggregate counts; no message is named.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from bench.common import dependence_of, require_corpora, tokenised_split, write_json
from textnb.config import FilterConfig
from textnb.decision import calibration as cal
from textnb.evaluation import metrics
from textnb.evaluation.tune import (RANKING_TOLERANCE, SEARCH_GRID, _held_out_costs,
                                   _search_scores, _settings, cross_fitted, describe,
                                   make_folds, ordered)
from textnb.evaluation.cross_validation import training_rows
from textnb.features.vectorize import Vocabulary
from textnb.mail.corpora import corpora_root
from textnb.mail.sources import iter_index
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter

ROOT = Path(__file__).resolve().parents[1]
LAMBDAS = (1.0, 9.0, 999.0)
TOLERANCES = (1.25, 1.5, 2.0)
MAILBOX_WINDOWS = {"trec07p-early 40%->20%": (0.4, 0.6), "trec07p-early 60%->20%": (0.6, 0.8),
                   "trec07p-early 15,084->7,542": (15084, 22626)}
CELLS = (*MAILBOX_WINDOWS, "spamassassin chronological", "spamassassin hash")


def mailbox_tokens(spam_filter: SpamFilter):
    index = corpora_root() / "trec07p-early" / "full" / "index"
    pairs = [(m.label, spam_filter.tokens(m.raw)) for m in iter_index(str(index))]
    return [t for _, t in pairs], np.array([label == "spam" for label, _ in pairs], np.int64)


def cell_data(name: str, cache: dict):
    """(token lists, labels, rows to train on, rows to test, delivery order?)."""
    spam_filter = SpamFilter()
    if name in MAILBOX_WINDOWS:
        if "mailbox" not in cache:
            cache["mailbox"] = mailbox_tokens(spam_filter)
        tokens, y = cache["mailbox"]
        start, end = MAILBOX_WINDOWS[name]
        n_train, n_end = ((int(start * len(y)), int(end * len(y))) if start < 1
                          else (int(start), int(end)))
        return tokens[:n_end], y[:n_end], n_train, True
    chronological = name.endswith("chronological")
    tokens, y, n_train, _ = tokenised_split("spamassassin", spam_filter, chronological,
                                            in_delivery_order=True)
    return tokens, y, n_train, chronological


def settings_of(tokens, y, n_train: int, in_order: bool) -> list[dict]:
    """Per setting: held-out cost per λ and out-of-fold (1-AUC)% on the training part,
    and the test part's FP, FN and cost at the setting's tuned threshold per λ."""
    vocab = Vocabulary()
    X = vocab.transform(tokens, grow=True)
    pairs, headers = pair_columns(vocab.tokens_), header_columns(vocab.tokens_)
    base = FilterConfig()
    dependence = dependence_of(vocab, base)
    settings = _settings(base, SEARCH_GRID)
    if base not in settings:
        settings.insert(0, base)
    y_train = y[:n_train]
    folds = make_folds(y_train, 5, chronological=in_order)
    # Every setting learns the rows the defaults' regime selects (thick: the defaults'
    # thick pass over each fold's training rows, in order), as `tune --search` does.
    fold_rows = training_rows(X[:n_train], y_train, folds, base, pairs, headers, dependence)
    out_of_fold = _search_scores(X[:n_train], y_train, settings, folds, pairs, headers,
                                 dependence, fold_rows)
    whole = training_rows(X, y, [np.arange(n_train, len(y))], base, pairs, headers, dependence)
    future = _search_scores(X, y, settings, [np.arange(n_train, len(y))], pairs, headers,
                            dependence, whole)
    y_test = y[n_train:].astype(bool)
    rows = []
    for config, oof, scores in zip(settings, out_of_fold, future):
        _, flagged = cross_fitted(y_train, oof, folds, LAMBDAS)
        calibration = cal.fit(oof, y_train, "isotonic")
        test = {}
        for lam in LAMBDAS:
            flag = scores[n_train:] > cal.log_odds_threshold(calibration, lam)
            fp, fn = int(np.sum(flag & ~y_test)), int(np.sum(~flag & y_test))
            test[lam] = {"fp": fp, "fn": fn, "cost": lam * fp + fn}
        rows.append({"setting": describe(config), "base": config == base,
                     "held_out_cost": _held_out_costs(y_train, flagged),
                     "one_minus_auc_pct": metrics.one_minus_auc_pct(y_train, oof),
                     "test": test,
                     "test_one_minus_auc_pct": metrics.one_minus_auc_pct(y_test,
                                                                         scores[n_train:])})
    return rows


def choices(rows: list[dict]) -> dict:
    """Per rule and λ, the setting it chooses from the training part and its test cost."""
    out = {}
    rules = [("least-cost", None)] + [(f"ranking-guard {t:g}", t) for t in TOLERANCES]
    for lam in LAMBDAS:
        candidates = [{"row": r, "criterion": math.log1p(r["held_out_cost"][lam]),
                       "one_minus_auc_pct": r["one_minus_auc_pct"]} for r in rows]
        for rule, tolerance in rules:
            picked = (ordered([dict(c) for c in candidates], "least-cost") if tolerance is None
                      else ordered([dict(c) for c in candidates], tolerance=tolerance))[0]["row"]
            out.setdefault(rule, {})[f"{lam:g}"] = {"setting": picked["setting"],
                                                    **picked["test"][lam]}
        base = next(r for r in rows if r["base"])
        out.setdefault("no search (the defaults)", {})[f"{lam:g}"] = {
            "setting": base["setting"], **base["test"][lam]}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", action="append", choices=CELLS,
                        help="a cell to run (repeatable; default: all)")
    parser.add_argument("--json", type=Path, default=ROOT / "docs/results/search-rule.json")
    args = parser.parse_args(argv)
    require_corpora()
    cache, results = {}, {}
    for name in args.cell or CELLS:
        tokens, y, n_train, in_order = cell_data(name, cache)
        rows = settings_of(tokens, y, n_train, in_order)
        results[name] = {"train": n_train, "test": len(y) - n_train, "choices": choices(rows)}
        for rule, by_lambda in results[name]["choices"].items():
            print(f"{name:30} {rule:26} " + "  ".join(
                f"λ={lam}: {c['cost']:g} ({c['fp']} FP)" for lam, c in by_lambda.items()),
                flush=True)
    geometric = {}
    for rule in next(iter(results.values()))["choices"]:
        geometric[rule] = {f"{lam:g}": math.expm1(np.mean([
            math.log1p(r["choices"][rule][f"{lam:g}"]["cost"]) for r in results.values()]))
            for lam in LAMBDAS}
    write_json(args.json, {"tolerance_in_use": RANKING_TOLERANCE, "cells": results,
                           "geometric_mean_cost": geometric})
    return 0


if __name__ == "__main__":
    sys.exit(main())
