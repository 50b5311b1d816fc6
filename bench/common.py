"""textnb-side helpers several bench scripts share: a corpus's split tokenised (as token
lists, or as one matrix), a corpus with its training rows and token matrices cached
(``Corpus``), scoring a test split as a configured filter would, counting a filter from
token lists and measuring it, and answering the tokenizer from a cache."""

from __future__ import annotations

import hashlib
import time

import numpy as np

from textnb.config import parse_override_value
from textnb.evaluation import metrics
from textnb.evaluation.cross_validation import fit_rows, fit_rows_in_order, score_rows
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import (CHRONOLOGICAL, chronological_split, delivery_order, is_test,
                                 iter_corpus, split)
from textnb.models.dependence import make_dependence
from textnb.models.evidence import PAIR_PREFIX, header_columns, pair_columns
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter


def split_in_order(name: str, chronological: bool = False, in_delivery_order: bool = False):
    """(training Examples, test Examples) of the corpora README's split; the training
    part in delivery order with ``in_delivery_order`` for a dated corpus (what a thick
    fit learns in order: ``textnb.mail.corpora.delivery_order``), else in the split's
    order (the corpus's own)."""
    if chronological:  # per class, the latest fifth by date is the test part
        train, test = chronological_split(name, iter_corpus(name))
    else:
        train, test = split(iter_corpus(name))
    if in_delivery_order and name in CHRONOLOGICAL:
        train = delivery_order(name, train)
    return train, test


def ledger_digests(examples) -> list[bytes]:
    """Each message's ledger digest: a message given twice is learned once
    (``fit_rows_in_order``'s ``digests``)."""
    return [hashlib.sha256(normalise(e.raw)).digest() for e in examples]


def tokenised_split(name: str, spam_filter: SpamFilter, chronological: bool = False,
                    in_delivery_order: bool = False):
    """(token lists, labels, training rows, seconds) of :func:`split_in_order`'s parts,
    the training part's rows first."""
    train, test = split_in_order(name, chronological, in_delivery_order)
    start = time.perf_counter()
    tokens = [spam_filter.tokens(e.raw) for e in train + test]
    seconds = time.perf_counter() - start
    y = np.array([e.label == "spam" for e in train + test], dtype=np.int64)
    return tokens, y, len(train), seconds


def split_matrix(name: str, spam_filter: SpamFilter):
    """(X, y, n_train, train Examples, test Examples): train rows first, in delivery order
    for a dated corpus (:func:`split_in_order`: what a thick fit learns in order).

    Also sets ``spam_filter.vocabulary`` to X's, so ``spam_filter.pair_columns()``
    names X's word-pair columns."""
    train, test = split_in_order(name, in_delivery_order=True)
    tokens = [spam_filter.tokens(e.raw) for e in train + test]
    X = spam_filter.vocabulary.transform(tokens, grow=True)
    y = np.array([e.label == "spam" for e in train + test], dtype=np.int64)
    return X, y, len(train), train, test


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
        (:func:`dependence_of`)."""
        self.matrix(cfg)
        return dependence_of(self._vocabularies[repr(cfg.tokenizer)], cfg)

    def header_columns(self, cfg):
        """Which columns of ``matrix(cfg)`` come from header fields."""
        self.matrix(cfg)
        return self._headers[repr(cfg.tokenizer)]


def test_scores(tokens, y, n_train: int, cfg, digests=None):
    """Train on the first ``n_train`` token lists (in that order: ``cfg.training.regime``
    thick learns them as ``train`` does, ``fit_rows_in_order``; a repeated message is
    scored again), score the rest as a filter with ``cfg`` would: (their log-odds, the
    term-count matrix of all, its pair columns, its header columns, its dependence:
    :func:`dependence_of`). digests: one per row (:func:`ledger_digests`), so that a thick
    fit learns a repeated message once, as ``train`` does."""
    vocab = Vocabulary()
    X = vocab.transform(tokens, grow=True)
    pairs, headers = pair_columns(vocab.tokens_), header_columns(vocab.tokens_)
    dependence = dependence_of(vocab, cfg)
    if cfg.training.regime == "all":
        model = fit_rows(X, y, np.arange(n_train), cfg.model, cfg.features,
                         route_columns=headers)
    else:
        model = fit_rows_in_order(X, y, np.arange(n_train), cfg, pairs, headers,
                                  dependence, digests)[0]
    Xf = binarize(X) if cfg.features.features == "binary" else X
    scores = score_rows(model, Xf[n_train:], cfg.model, pairs, headers, dependence)
    return scores, X, pairs, headers, dependence


def dependence_of(vocab: Vocabulary, cfg):
    """Which of ``vocab``'s columns repeat another's evidence under ``cfg``
    (textnb.models.dependence; None when the configuration drops no such clues)."""
    return make_dependence(list(vocab.tokens_), vocab.columns,
                           cfg.model.clues_per_header_field, cfg.model.tile_word_pairs)


def tokenised(examples, spam_filter: SpamFilter) -> list[tuple[str, list[str]]]:
    """(label, tokens) of each example, in order."""
    return [(e.label, spam_filter.tokens(e.raw)) for e in examples]


def trained(pairs: list[tuple[str, list[str]]]) -> SpamFilter:
    """A default filter counted from (label, tokens) pairs."""
    spam_filter = SpamFilter()
    spam_filter.learn_tokens([t for _, t in pairs], [label for label, _ in pairs])
    return spam_filter


def measures(spam_filter: SpamFilter, test: list[tuple[str, list[str]]]) -> dict[str, float]:
    """(1-AUC)%, sm% at hm 0.1% and the default threshold's error % on ``test``."""
    y = np.array([label == "spam" for label, _ in test])
    scores = spam_filter.log_odds_tokens([t for _, t in test])
    called = np.array([str(label) == "spam" for label in spam_filter.cost_model().labels(scores)])
    return {"1-auc%": metrics.one_minus_auc_pct(y, scores),
            "sm%@hm0.1%": metrics.sm_at_hm(y, scores, 0.001),
            "error%": 100.0 * float(np.mean(called != y))}


def cache_tokens(cache: dict[bytes, list[str]], messages, tokenizer: SpamFilter) -> None:
    """Each message's tokens into ``cache`` under its normalised bytes, the key
    :class:`TokenCache` reads (the tokenizer is deterministic: once a message)."""
    for m in messages:
        raw = normalise(m.raw)
        if raw not in cache:
            cache[raw] = tokenizer.tokens(raw)


class TokenCache:
    """SpamFilter.tokens answered from a dict (normalised bytes -> tokens) inside the
    block, so that the ledger path (retrain.learn_messages) runs without tokenising;
    ``pairs=False`` leaves the ``bi:`` word pairs out (what tokenizer.bigrams = false
    gives)."""

    def __init__(self, tokens: dict[bytes, list[str]], pairs: bool = True):
        self.tokens, self.pairs = tokens, pairs

    def __enter__(self):
        self.original = SpamFilter.tokens
        tokens, pairs = self.tokens, self.pairs
        SpamFilter.tokens = lambda _, raw: (list(tokens[raw]) if pairs else
                                            [t for t in tokens[raw] if not t.startswith(PAIR_PREFIX)])
        return self

    def __exit__(self, *exc):
        SpamFilter.tokens = self.original


def named_variants(texts: list[str], base: dict | None = None) -> dict[str, dict]:
    """``--variant NAME=section.key=value,section.key=value`` options as {name: overrides},
    after {"textnb": base} (the defaults, or the ``--set`` overrides every variant shares)."""
    base = dict(base or {})
    variants = {"textnb": base}
    for text in texts:
        name, _, settings = text.partition("=")
        variants[name] = {**base, **{k: parse_override_value(v) for k, _, v in
                                     (s.partition("=") for s in settings.split(",") if s)}}
    return variants


def corpus_arguments(doc: str, corpora=None):
    """The argument parser most bench scripts start from: ``--corpus`` (repeatable, one of
    ``corpora``, default every public corpus) and ``--json OUT``; the description is the
    first line of the script's docstring."""
    import argparse

    from textnb.mail.corpora import CORPORA

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=corpora or CORPORA)
    parser.add_argument("--json")
    return parser


def require_corpora() -> None:
    """Stop with the fix when the public corpora are not where the scripts look."""
    import sys

    from textnb.mail.corpora import corpora_root

    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")


def write_json(path, data) -> None:
    """``data`` as indented JSON at ``path`` (folders made), if a path was given."""
    import json
    from pathlib import Path

    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=1) + "\n")
