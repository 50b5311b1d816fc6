"""Trained once, then scoring the next messages: learning every message against the thick
threshold's selection.

    python -m bench.train_regimes [--margin M ...] [--json docs/results/train-regimes.json]

``textnb train --regime thick`` learns the training mail in the order given, and of each
message only if the model of the messages before it gets it wrong or right by less than the
margin (``textnb.modelfile.lifecycle``, the code ``train`` and ``retrain`` run). Each
variant's model is trained so on a training part in delivery order and scores the test
part once; reported: (1-AUC)% and sm% at hm 0.1%, how many messages were learned, and the
95% interval of each figure's difference from learning every message (the same test
messages resampled, hams and spams apart, 1,000 times: ``bench.stats.paired_bootstrap``).

Cells: the real mailbox (trec07p-early, its index's order is delivery order: the first 40%
-> the next 20%, the first 60% -> the next 20%, the first 15,084 -> the next 7,542;
aggregate figures only) and SpamAssassin's and Enron 1-3's hash and chronological splits
(the corpora README's), each training part in delivery order
(``textnb.mail.corpora.delivery_order``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench.common import TokenCache, cache_tokens, require_corpora, write_json
from bench.stats import paired_bootstrap
from textnb.config import FilterConfig
from textnb.evaluation import metrics
from textnb.mail.corpora import (chronological_split, corpora_root, delivery_order, iter_corpus,
                                 split)
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile.retrain import learn_messages
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter

MARGINS = (30.0, 40.0, 60.0)
MAILBOX = "trec07p-early"


def cells(root) -> dict[str, tuple[list[RawMessage], list[RawMessage]]]:
    """Cell name -> (training part in delivery order, test part)."""
    mailbox = list(iter_index(str(root / MAILBOX / "full" / "index")))
    n = len(mailbox)
    out = {f"{MAILBOX} {name}": (mailbox[:a], mailbox[a:b]) for name, (a, b) in {
        "first 40% -> next 20%": (int(0.4 * n), int(0.6 * n)),
        "first 60% -> next 20%": (int(0.6 * n), int(0.8 * n)),
        "first 15,084 -> next 7,542": (15084, 22626)}.items()}
    for corpus in ("spamassassin", "enron"):
        examples = list(iter_corpus(corpus, root))
        for name, (train, test) in (("hash", split(examples)),
                                    ("chronological", chronological_split(corpus, examples))):
            out[f"{corpus} {name}"] = tuple(
                [RawMessage(e.relpath, e.raw, e.label) for e in part]
                for part in (delivery_order(corpus, train), test))
    return out


def trained_scores(train, test, config, regime: str, margin: float):
    spam_filter = SpamFilter(config)
    learn_messages(spam_filter, train, regime=regime, margin=margin)
    scores = spam_filter.log_odds([normalise(m.raw) for m in test])
    return scores, sum(spam_filter.n_learned.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--margin", action="append", type=float,
                        help=f"thick margins to run (default {', '.join(map(str, MARGINS))})")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    require_corpora()
    config = FilterConfig()
    variants = [("all", 0.0)] + [("thick", m) for m in (args.margin or MARGINS)]
    tokens, tokenizer = {}, SpamFilter(config)
    out = {"variants": [f"{r} {m:g}" if r == "thick" else r for r, m in variants], "cells": {}}
    for name, (train, test) in cells(corpora_root()).items():
        cache_tokens(tokens, train + test, tokenizer)
        y = np.array([m.label == "spam" for m in test])
        row, reference = {"n_train": len(train), "n_test": len(test)}, None
        with TokenCache(tokens):
            for regime, margin in variants:
                scores, learned = trained_scores(train, test, config, regime, margin)
                label = f"{regime} {margin:g}" if regime == "thick" else regime
                auc, sm = metrics.one_minus_auc_pct(y, scores), metrics.sm_at_hm(y, scores)
                figures = {"one_minus_auc_pct": round(float(auc), 4),
                           "sm_pct_at_hm_0.1pct": round(float(sm), 2), "learned": learned}
                if reference is None:
                    reference = scores
                else:
                    boot = paired_bootstrap(y, scores, reference, 1000, seed=2003)
                    figures["vs_all_95pct"] = {k: [round(v, 4) for v in boot[k]["diff_ci95"]]
                                               for k in boot}
                row[label] = figures
                print(f"{name:<45} {label:<9} {figures}", flush=True)
        out["cells"][name] = row
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
