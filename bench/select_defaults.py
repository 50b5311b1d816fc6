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
import time
from pathlib import Path

import numpy as np

from bench.common import dependence_of
from textnb.config import load_config, parse_override_value
from textnb.evaluation.cross_validation import (fit_rows, out_of_fold_log_odds, score_rows,
                                                stratified_folds)
from textnb.evaluation.metrics import one_minus_auc_pct, sm_at_hm
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import (CHRONOLOGICAL, CORPORA, chronological_split, corpora_root,
                                 is_test, iter_corpus)
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter


def parse_variant(text: str) -> dict:
    overrides = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--variant item {item!r} is not section.key=value")
        overrides[key] = parse_override_value(value)
    return overrides


class Corpus:
    """One corpus's messages, their hash and chronological training rows, and token lists
    cached per tokenizer setting."""

    def __init__(self, name: str, keep_tokens: bool = False):
        self.name = name
        self.keep_tokens = keep_tokens  # keep the vocabulary's tokens (``tokens_``)
        examples = list(iter_corpus(name))
        self.raw = [e.raw for e in examples]
        self.y = np.array([e.label == "spam" for e in examples], dtype=np.int64)
        row = {e.relpath: i for i, e in enumerate(examples)}
        self.hash_train = np.array([i for i, e in enumerate(examples) if not is_test(e.relpath)])
        self.chrono = None
        if name in CHRONOLOGICAL:
            train, _ = chronological_split(name, examples)
            # The chronological split again, inside the training part only.
            fit, valid = chronological_split(name, train)
            self.chrono = (np.array([row[e.relpath] for e in fit]),
                           np.array([row[e.relpath] for e in valid]))
        self._tokens: dict[str, tuple] = {}
        self._headers: dict[str, object] = {}
        self._vocabularies: dict[str, Vocabulary] = {}

    def matrix(self, cfg):
        key = repr(cfg.tokenizer)  # a frozen dataclass: its repr is every setting
        if key not in self._tokens:
            spam_filter = SpamFilter(cfg)
            start = time.perf_counter()
            tokens = [spam_filter.tokens(raw) for raw in self.raw]
            seconds = time.perf_counter() - start
            vocab = Vocabulary()
            X = vocab.transform(tokens, grow=True)
            if self.keep_tokens:
                self.tokens_ = vocab.tokens_
            self._tokens[key] = (X, pair_columns(vocab.tokens_), seconds)
            self._headers[key] = header_columns(vocab.tokens_)
            self._vocabularies[key] = vocab
        return self._tokens[key]

    def dependence(self, cfg):
        """Which columns of ``matrix(cfg)`` repeat another's evidence under ``cfg``
        (bench.common.dependence_of)."""
        self.matrix(cfg)
        return dependence_of(self._vocabularies[repr(cfg.tokenizer)], cfg)

    def header_columns(self, cfg):
        """Which columns of ``matrix(cfg)`` come from header fields."""
        self.matrix(cfg)
        return self._headers[repr(cfg.tokenizer)]


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
        model = fit_rows(X, corpus.y, fit, cfg.model, cfg.features)
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
