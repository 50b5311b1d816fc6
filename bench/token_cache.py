"""The real mailbox and the public corpora as token ids, cached once, and the windows of
the mailbox in delivery order: shared by the benchmarks that measure clue selection and
tuning on the same counts (``bench.dependent_evidence``, ``bench.fold_kinds``).

Each corpus is tokenised once (textnb's tokenizer, default settings) and kept as token ids
under a cache folder; a benchmark's variants then run on the same counts. trec07p-early's
terms allow aggregate figures only: nothing here prints or writes a message's name or label.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from array import array
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bench.peers import Split, run_bogofilter
from textnb.config import load_config
from textnb.evaluation import metrics
from textnb.evaluation.cross_validation import score_rows
from textnb.evaluation.tune import operating_point
from textnb.mail.corpora import corpora_root, iter_corpus
from textnb.models.dependence import make_dependence
from textnb.models.evidence import header_columns, pair_columns
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter

TREC = "trec07p-early"
DEFAULT_CACHE = Path("/tmp/evidence-cache")


# -- tokens, once per corpus ------------------------------------------------------------
def _messages(name: str, root: Path):
    """(key, label, raw) of every message of a corpus; trec07p-early in delivery order
    (its index), keyed by position only."""
    if name == TREC:
        folder = root / TREC / "full"
        for i, line in enumerate((folder / "index").read_text().split("\n")):
            if line.strip():
                label, path = line.split()
                yield str(i), label, (folder / path).read_bytes()
        return
    for e in iter_corpus(name, root):
        yield e.relpath, e.label, e.raw


def tokenised(name: str, cache: Path) -> dict:
    """The corpus as token ids: {"keys", "labels", "ids" (concatenated), "offsets",
    "tokens" (id -> token), "digests" (of the message as the ledger knows it)}, from
    ``cache`` or tokenised now and saved there."""
    path = cache / f"{name}.npz"
    if path.exists():
        data = np.load(path, allow_pickle=False)
        out = {k: data[k] for k in data.files}
        out["tokens"] = json.loads((cache / f"{name}.tokens.json").read_text())
        return out
    root = corpora_root()
    spam_filter = SpamFilter(load_config(None, {}))
    index: dict[str, int] = {}
    keys, labels, ids, offsets, digests = [], [], array("i"), [0], []
    for key, label, raw in _messages(name, root):
        # trec07p-early is learned as the ledger learns (bench.online: the normalised
        # bytes); the public cells are tokenised as bench.accuracy does (raw).
        text = normalise(raw) if name == TREC else raw
        for token in spam_filter.tokens(text):
            ids.append(index.setdefault(token, len(index)))
        offsets.append(len(ids))
        keys.append(key)
        labels.append(label == "spam")
        digests.append(hashlib.sha256(normalise(raw)).hexdigest()[:16])
    tokens = list(index)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, keys=np.array(keys), labels=np.array(labels), ids=np.frombuffer(ids, np.int32),
             offsets=np.array(offsets, np.int64), digests=np.array(digests))
    (cache / f"{name}.tokens.json").write_text(json.dumps(tokens))
    return tokenised(name, cache)


def matrix(corpus: dict, rows: np.ndarray) -> tuple[sp.csr_matrix, list[str]]:
    """The term-count matrix of the messages ``rows`` (in that order) and its tokens,
    columns in order of first sight as ``Vocabulary().transform(..., grow=True)`` numbers
    them, so ties between clues break as the filter's would."""
    offsets, ids = corpus["offsets"], corpus["ids"]
    lengths = offsets[rows + 1] - offsets[rows]
    take = np.concatenate([np.arange(offsets[r], offsets[r + 1]) for r in rows]) if len(rows) else np.zeros(0, np.int64)
    seq = ids[take]
    first_ids, first_at = np.unique(seq, return_index=True)
    order = first_ids[np.argsort(first_at)]
    column = np.full(len(corpus["tokens"]), -1, np.int64)
    column[order] = np.arange(order.size)
    doc = np.repeat(np.arange(len(rows)), lengths)
    X = sp.csr_matrix((np.ones(seq.size), (doc, column[seq])), shape=(len(rows), order.size))
    X.sum_duplicates()
    X.sort_indices()
    tokens = corpus["tokens"]
    return X, [tokens[i] for i in order]


# -- scoring a variant ---------------------------------------------------------------------
class Columns:
    """What the selection needs to know of a matrix's columns, made once per matrix: word
    pairs, header fields, and each variant's :class:`Dependence`."""

    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.pairs = pair_columns(tokens)
        self.headers = header_columns(tokens)
        index = {t: i for i, t in enumerate(tokens)}
        self._lookup = lambda words: np.array([index.get(w, -1) for w in words], np.int64)
        self._dependence: dict[tuple, object] = {}

    def dependence(self, m):
        key = (m.clues_per_header_field, m.tile_word_pairs)
        if key not in self._dependence:
            self._dependence[key] = make_dependence(self.tokens, self._lookup, *key)
        return self._dependence[key]

    def score(self, model, X, cfg) -> np.ndarray:
        return score_rows(model, X, cfg.model, self.pairs, self.headers,
                          self.dependence(cfg.model))


def figures(y: np.ndarray, s: np.ndarray) -> dict:
    return {"one_minus_auc_pct": round(float(metrics.one_minus_auc_pct(y, s)), 4),
            "sm_pct_at_hm_0.1pct": round(float(metrics.sm_at_hm(y, s, 0.001)), 2)}


def cost_at(y: np.ndarray, s: np.ndarray, threshold: float, lam: float) -> dict:
    """FP, FN and λ·FP + FN of the rule spam iff score > threshold
    (``textnb.evaluation.tune.operating_point``'s figures)."""
    point = operating_point(y, s, threshold, lam)
    return {"fp": point["fp"], "fn": point["fn"], "cost": point["cost"]}


# -- trec07p-early: windows in delivery order -------------------------------------------------
def windows(n: int) -> list[tuple[str, int, int]]:
    return [("first 40% -> next 20%", int(0.4 * n), int(0.6 * n)),
            ("first 60% -> next 20%", int(0.6 * n), int(0.8 * n)),
            ("first 15,084 -> next 7,542", 15_084, 15_084 + 7_542)]


def rolling_windows(n: int) -> list[tuple[str, int, int]]:
    """Trained on the first 2..9 tenths in delivery order, each scoring the next tenth: every
    stretch of the mailbox after the first fifth is someone's next messages once."""
    tenth = n // 10
    return [(f"first {i}0% -> next 10%", i * tenth, n if i == 9 else (i + 1) * tenth)
            for i in range(2, 10)]


def trec_paths(corpus: dict) -> list[str]:
    folder = corpora_root() / TREC / "full"
    lines = [line.split() for line in (folder / "index").read_text().split("\n") if line.strip()]
    return [str((folder / path).resolve()) for _, path in lines]


def bogofilter_window(corpus: dict, a: int, b: int) -> dict:
    """bogofilter 1.2.5 trained on the first ``a`` messages, scoring the next ones
    (``bench.peers.run_bogofilter``: default options, the files as they are)."""
    paths = trec_paths(corpus)
    y = corpus["labels"].astype(bool)
    with tempfile.TemporaryDirectory(prefix="textnb-dependent-") as tmp:
        s = Split(TREC, Path(tmp), [p for p, spam in zip(paths[:a], y[:a]) if spam],
                  [p for p, spam in zip(paths[:a], y[:a]) if not spam], paths[a:b], y[a:b],
                  [], y[:a], [])
        run = run_bogofilter(s)
    spam_verdict = run.is_spam_pred
    return {**figures(y[a:b], run.scores),
            "own_verdict": {"fp": int((spam_verdict & ~y[a:b]).sum()),
                            "fn": int((~spam_verdict & y[a:b]).sum()),
                            "unsure": run.n_unsure}}
