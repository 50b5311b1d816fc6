"""Do numeric message features (size, links, recipients, capitals, ...) help the tokens?

    python -m bench.numeric_features [--corpus spamassassin] [--cv 5] [--json OUT]

Parses and tokenises each message of the corpus once (textnb.models.numeric.FEATURES come
from the same parse), then reports (1-AUC)% for the default text model alone, the
text model plus a Gaussian or a kernel-density model of the numeric features
(textnb.models.numeric: their log-likelihood ratio is added to the tokens' log-odds, as
naive Bayes does), and the numeric features alone. Both on the README's test split
(trained on the training split) and, with --cv K, out of fold on the training split
only, which is what a default is chosen by.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from textnb.config import FilterConfig
from textnb.evaluation.cross_validation import fit_rows, stratified_folds
from textnb.evaluation.metrics import one_minus_auc_pct
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import iter_corpus, split
from textnb.mail.parse import parse_message
from textnb.models.evidence import header_columns
from textnb.models.numeric import FEATURES, make_numeric_model, message_features
from textnb.text.tokenize import EmailTokenizer


def load(corpus: str, cfg: FilterConfig):
    train, test = split(iter_corpus(corpus))
    tokenizer = EmailTokenizer(cfg.tokenizer)
    tokens, numbers = [], []
    start = time.perf_counter()
    for e in train + test:
        email = parse_message(e.raw)
        tokens.append(tokenizer(email))
        numbers.append(message_features(e.raw, email))
    y = np.array([e.label == "spam" for e in train + test], dtype=np.int64)
    print(f"parsed and tokenised {len(y)} messages in {time.perf_counter() - start:.0f} s",
          file=sys.stderr)
    vocab = Vocabulary()
    X = vocab.transform(tokens, grow=True)
    return X, np.array(numbers), y, len(train), header_columns(vocab.tokens_)


def scores(X, Z, y, train, test, cfg: FilterConfig, k: int,
           headers: np.ndarray) -> dict[str, np.ndarray]:
    """Log-odds of the test rows for each variant, models fit on the train rows (headers:
    the route's columns, for model.route_alpha)."""
    text = fit_rows(X, y, train, cfg.model, cfg.features, route_columns=headers)
    Xf = binarize(X) if cfg.features.features == "binary" else X
    out = {"text": text.selected_log_odds(Xf[test], k)}
    for kind in ("gaussian", "kde"):
        numeric = make_numeric_model(kind).fit(Z[train], y[train])
        evidence = numeric.log_odds(Z[test])
        out[f"text+{kind}"] = out["text"] + evidence
        out[f"{kind} alone"] = evidence
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--cv", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    cfg = FilterConfig()
    X, Z, y, n_train, headers = load(args.corpus, cfg)
    train, test = np.arange(n_train), np.arange(n_train, len(y))
    results: dict = {"corpus": args.corpus, "features": list(FEATURES)}
    for k in (cfg.model.max_discriminators, 0):
        s = scores(X, Z, y, train, test, cfg, k, headers)
        row = {name: round(one_minus_auc_pct(y[test], v), 4) for name, v in s.items()}
        results[f"test, max_discriminators={k}"] = row
        if args.cv:
            oof: dict[str, np.ndarray] = {}
            for fold in stratified_folds(y[train], args.cv):
                rest = np.setdiff1d(train, fold)
                for name, v in scores(X, Z, y, rest, fold, cfg, k, headers).items():
                    oof.setdefault(name, np.full(n_train, np.nan))[fold] = v
            results[f"cv{args.cv}, max_discriminators={k}"] = {
                name: round(one_minus_auc_pct(y[train], v), 4) for name, v in oof.items()}
    for key, row in results.items():
        if isinstance(row, dict):
            print(f"{key}:")
            for name, value in row.items():
                print(f"  {name:<16} (1-AUC)% {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
