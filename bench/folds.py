"""A whole corpus cut into folds (Ling-Spam's ten parts, or five by the corpora
README's hash), and a peer filter and textnb run fold by fold.
Used by bench/tenfold_parts.py, bench/tune_folds.py and bench/list_reader.py."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np

from bench import peers
from bench.common import dependence_of
from textnb.evaluation.cross_validation import fit_rows, score_rows
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import chronological_split, iter_corpus
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter


def fold_of(corpus: str, relpath: str) -> str:
    """Ling-Spam: the message's part; any other corpus: 'hash0'..'hash4' (0 = test split)."""
    if corpus == "lingspam":
        return relpath.split("/", 1)[0]
    return f"hash{int(hashlib.md5(relpath.encode('utf-8')).hexdigest(), 16) % 5}"


def load_folds(corpus: str = "lingspam") -> tuple[list[str], list[bytes], np.ndarray]:
    """Every message of a corpus: its fold, its bytes, whether it is spam."""
    examples = list(iter_corpus(corpus))
    part = [fold_of(corpus, e.relpath) for e in examples]
    return part, [e.raw for e in examples], np.array([e.label == "spam" for e in examples])


def chronological_parts(corpus: str) -> tuple[list[str], list[bytes], np.ndarray]:
    """The corpora README's chronological split as two parts, 'past' (only trained on)
    and 'test' (the latest fifth of each class): parts, bytes, whether each is spam."""
    past, test = chronological_split(corpus, iter_corpus(corpus))
    examples = past + test
    return (["past"] * len(past) + ["test"] * len(test), [e.raw for e in examples],
            np.array([e.label == "spam" for e in examples]))


def peer_folds(run, part, raw, y, workdir: Path, corpus: str = "lingspam"
               ) -> tuple[np.ndarray, np.ndarray, int]:
    """A peer's pooled scores and verdicts over the folds, and its Unsure count."""
    part = np.asarray(part)
    scores, verdicts, unsure = np.zeros(len(raw)), np.zeros(len(raw), bool), 0
    for name in sorted(set(part)):
        fold_dir = Path(tempfile.mkdtemp(dir=workdir, prefix=name + "-"))
        train, test = np.flatnonzero(part != name), np.flatnonzero(part == name)
        rel = {}
        for i in np.r_[train, test]:
            where = f"test/{i:05d}" if part[i] == name else \
                f"train/{'spam' if y[i] else 'ham'}/{i:05d}"
            peers.write_file(fold_dir / where, raw[i])
            rel[i] = where
        s = peers.Split(corpus=corpus, workdir=fold_dir,
                        train_spam=[rel[i] for i in train if y[i]],
                        train_ham=[rel[i] for i in train if not y[i]],
                        test=[rel[i] for i in test], y_test=y[test],
                        train_raw=[raw[i] for i in train], y_train=y[train],
                        test_raw=[raw[i] for i in test])
        r = run(s)
        scores[test], verdicts[test], unsure = r.scores, r.is_spam_pred, unsure + r.n_unsure
    return scores, verdicts, unsure


def textnb_folds(cfg, part, raw, y) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold log-odds and verdicts of textnb with ``cfg``, fold = Ling-Spam part."""
    spam_filter = SpamFilter(cfg)
    vocabulary = Vocabulary()
    X = vocabulary.transform([spam_filter.tokens(r) for r in raw], grow=True)
    pairs, headers = pair_columns(vocabulary.tokens_), header_columns(vocabulary.tokens_)
    dependence = dependence_of(vocabulary, cfg)
    Xf = binarize(X) if cfg.features.features == "binary" else X
    part = np.asarray(part)
    scores = np.zeros(len(raw))
    for name in sorted(set(part)):
        test = np.flatnonzero(part == name)
        model = fit_rows(X, y.astype(np.int64), np.flatnonzero(part != name), cfg.model,
                         cfg.features, route_columns=headers)
        scores[test] = score_rows(model, Xf[test], cfg.model, pairs, headers, dependence)
    return scores, scores > np.log(cfg.decision.cost_ratio)
