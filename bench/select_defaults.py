"""Choose settings on training data only: hash cross-validation *and* chronological validation.

    python -m bench.select_defaults --variant "" --variant "tokenizer.header_mode=all" \\
        [--variant "model.max_discriminators=20,model.evidence=strongest" ...] \\
        [--corpus spamassassin ...] [--json OUT]

Each ``--variant`` is a comma-separated list of ``section.key=value`` overrides of the
default configuration ("" = the defaults). For every variant and corpus it reports:

- **hash CV**: 5-fold stratified cross-validation on the training part of the corpora
  README's hash split (``textnb.mail.corpora.split``), out-of-fold scores pooled;
- **chronological validation** (SpamAssassin and Enron 1-3, the corpora with dates): the
  training part of the README's chronological split (``chronological_split``) is split
  again the same way -- per class (and Enron set), by date, the latest fifth of the
  training part is the validation set -- so the model is trained on the past and scores
  the future without touching either test set.

Metrics: (1-AUC)% and sm% at hm = 0.1% (lower is better), and for the summary their
geometric means over the cells, the rule the project's defaults have been chosen by
(configs/default.toml). Messages are tokenised once per distinct tokenizer setting.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench.common import Corpus
from textnb.config import load_config, parse_override_value
from textnb.evaluation.cross_validation import (fit_rows, out_of_fold_log_odds, score_rows,
                                                stratified_folds)
from textnb.evaluation.metrics import one_minus_auc_pct, sm_at_hm
from textnb.features.vectorize import binarize
from textnb.mail.corpora import CORPORA, corpora_root


def parse_variant(text: str) -> dict:
    overrides = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--variant item {item!r} is not section.key=value")
        overrides[key] = parse_override_value(value)
    return overrides


def cell(y, scores) -> dict:
    return {"one_minus_auc_pct": one_minus_auc_pct(y, scores),
            "sm_pct_at_hm_0.1pct": sm_at_hm(y, scores)}


def evaluate(corpus: Corpus, cfg, folds: int = 5) -> dict:
    X, pairs, _ = corpus.matrix(cfg)
    headers = corpus.header_columns(cfg)
    out = {}
    rows = corpus.hash_train
    y = corpus.y[rows]
    dependence = corpus.dependence(cfg)
    oof = out_of_fold_log_odds(X[rows], y, cfg.model, cfg.features, stratified_folds(y, folds),
                               pairs, headers, dependence)
    out["hash_cv"] = cell(y, oof)
    if corpus.chrono is not None:
        fit, valid = corpus.chrono
        model = fit_rows(X, corpus.y, fit, cfg.model, cfg.features, route_columns=headers)
        Xf = binarize(X) if cfg.features.features == "binary" else X
        out["chrono_val"] = cell(corpus.y[valid], score_rows(model, Xf[valid], cfg.model, pairs,
                                                                   headers, dependence))
    return out


def geometric_mean(values) -> float:
    values = np.maximum(np.asarray(values, dtype=float), 1e-3)  # a perfect cell is 0
    return float(np.exp(np.mean(np.log(values))))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", default=None)
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--config")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    variants = args.variant or [""]
    corpora = [Corpus(name) for name in (args.corpus or CORPORA)]
    results = []
    for text in variants:
        cfg = load_config(args.config, parse_variant(text))
        row = {"variant": text or "(defaults)", "cells": {}}
        for corpus in corpora:
            row["cells"][corpus.name] = evaluate(corpus, cfg)
        cells = [c for by in row["cells"].values() for c in by.values()]
        row["gmean_one_minus_auc_pct"] = geometric_mean([c["one_minus_auc_pct"] for c in cells])
        row["gmean_sm_pct_at_hm_0.1pct"] = geometric_mean([c["sm_pct_at_hm_0.1pct"] for c in cells])
        results.append(row)
        parts = "  ".join(f"{name}:{kind}={c['one_minus_auc_pct']:.3f}/{c['sm_pct_at_hm_0.1pct']:.2f}"
                          for name, by in row["cells"].items() for kind, c in by.items())
        print(f"{row['variant']:<60} gmean {row['gmean_one_minus_auc_pct']:.4f} / "
              f"{row['gmean_sm_pct_at_hm_0.1pct']:.2f}  |  {parts}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
