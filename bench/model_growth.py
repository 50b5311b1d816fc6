"""How a model grows with mail, and what a bound on its size would cost in accuracy.

    python bench/model_growth.py [--step 2500] [--json OUT]

Growth. SpamAssassin in delivery order, then Enron 1-3 in delivery order
(``textnb.corpora.delivery_order``): one mailbox's years, then another's, 22,588
messages. They are learned with the default settings, with word pairs and without
(the same tokens less the ``bi:`` pairs: the tokenizer with ``tokenizer.bigrams =
false`` gives exactly those, checked on 100 SpamAssassin messages), each message
recorded in the ledger as ``textnb retrain`` records it. Every ``--step`` messages:
the tokens held, how many of them are in only one or two learned messages (df 1, df
<= 2), and the model file's size (``store.dumps``: the compressed arrays and the
ledger); at the end also the text dump's size. "Per 10,000" is the growth over the
last 10,000 messages.

Bound. Per corpus, the corpora README's chronological split (per class by date, the
latest fifth is the test part); the training part learned in date order. A
compaction that drops every token held by at most ``k`` learned messages, except
those in the last ``N`` learned messages, is applied once at the end (the columns
are removed, as a compacted file would hold them), and the test part scored:
(1-AUC)%, sm% at hm 0.1% and the default threshold's error % (bench/learning_curve.py's
``measures``), tokens and model-file bytes against the unbounded model.
Messages are tokenised once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learning_curve import measures  # noqa: E402

from textnb import dump, store  # noqa: E402
from textnb.config import load_config  # noqa: E402
from textnb.corpora import chronological_split, corpora_root, delivery_order, iter_corpus  # noqa: E402
from textnb.evidence import PAIR_PREFIX  # noqa: E402
from textnb.ledger import normalise, tokens_hash  # noqa: E402
from textnb.pipeline import SpamFilter  # noqa: E402

CORPORA = ("spamassassin", "enron")
# (k, N): drop tokens in <= k learned messages unless in the last N learned ones.
BOUNDS = ((1, 0), (1, 2000), (2, 2000), (2, 0))


def _tokenised(corpus: str, tokenizer: SpamFilter) -> list[tuple[str, str, bytes, list[str]]]:
    """(relpath, label, ledger digest, tokens) of every message, in delivery order."""
    out = []
    for e in delivery_order(corpus, iter_corpus(corpus)):
        norm = normalise(e.raw)  # what retrain digests and tokenises
        out.append((e.relpath, e.label, hashlib.sha256(norm).digest(), tokenizer.tokens(norm)))
    return out


def _learn(spam_filter: SpamFilter, batch) -> None:
    """Learn the messages the ledger does not hold yet (Enron repeats some: retrain
    learns a repeated message once)."""
    new = {}
    for message in batch:
        if message[2] not in spam_filter.ledger:
            new.setdefault(message[2], message)
    new = list(new.values())
    spam_filter.learn_tokens([t for *_, t in new], [label for _, label, _, _ in new])
    for _, label, digest, tokens in new:
        spam_filter.ledger.record(digest, label, tokens_hash(tokens))


def _without_pairs(messages):
    return [(r, label, d, [t for t in tokens if not t.startswith(PAIR_PREFIX)])
            for r, label, d, tokens in messages]


def _point(spam_filter: SpamFilter, n: int) -> dict:
    df = spam_filter.counts()["doc_freq"]
    return {"messages": n, "tokens": int((df > 0).sum()), "df1": int((df == 1).sum()),
            "df_le2": int((df <= 2).sum()), "file_bytes": len(store.dumps(spam_filter))}


def growth(stream, step: int) -> dict:
    out = {}
    for name, messages, bigrams in (("pairs", stream, True),
                                    ("no_pairs", _without_pairs(stream), False)):
        f = SpamFilter(load_config(None, {"tokenizer.bigrams": bigrams}))
        points = []
        for start in range(0, len(messages), step):
            _learn(f, messages[start:start + step])
            points.append(_point(f, min(start + step, len(messages))))
            print(f"  {name}: {points[-1]}", file=sys.stderr, flush=True)
        last, back = points[-1], next(p for p in reversed(points)
                                      if p["messages"] <= points[-1]["messages"] - 10_000)
        span = last["messages"] - back["messages"]
        per_10k = {k: round((last[k] - back[k]) * 10_000 / span)
                   for k in ("tokens", "file_bytes")}
        out[name] = {"points": points, "per_10000_last": per_10k,
                     "dump_bytes": len(dump.dumps(f))}
    return out


def pruned(spam_filter: SpamFilter, max_df: int, protected: set[str]) -> SpamFilter:
    """The filter with every token in <= max_df learned messages removed, bar ``protected``."""
    c = spam_filter.counts()
    keep = (c["doc_freq"] > max_df) | np.fromiter((t in protected for t in c["tokens"]), bool,
                                                  count=len(c["tokens"]))
    return SpamFilter.from_counts(
        spam_filter.config, [t for t, k in zip(c["tokens"], keep) if k], c["class_count"],
        c["feature_count"][:, keep], c["doc_freq"][keep], n_learned=spam_filter.n_learned,
        ledger=spam_filter.ledger)


def bound(corpus: str, messages) -> dict:
    by_path = {m[0]: m for m in messages}
    examples = list(iter_corpus(corpus))
    train_e, test_e = chronological_split(corpus, examples)
    train = [by_path[e.relpath] for e in train_e]
    test = [(label, tokens) for _, label, _, tokens in (by_path[e.relpath] for e in test_e)]
    full = SpamFilter()
    _learn(full, train)
    rows = {"none": {**measures(full, test), "tokens": len(full.vocabulary),
                     "file_bytes": len(store.dumps(full))}}
    for k, n in BOUNDS:
        protected = {t for *_, tokens in train[len(train) - n:] for t in tokens} if n else set()
        p = pruned(full, k, protected)
        rows[f"df<={k}, not in last {n}"] = {**measures(p, test), "tokens": len(p.vocabulary),
                                             "file_bytes": len(store.dumps(p))}
    return {"train": len(train), "test": len(test), "rows": rows}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=int, default=2500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("the public corpora are absent: set TEXTNB_CORPORA")
    start = time.perf_counter()
    tokenizer = SpamFilter()
    per_corpus = {c: _tokenised(c, tokenizer) for c in CORPORA}
    print(f"tokenised in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    result = {"growth": growth([m for c in CORPORA for m in per_corpus[c]], args.step),
              "bound": {c: bound(c, per_corpus[c]) for c in CORPORA},
              "seconds": round(time.perf_counter() - start)}
    for name, g in result["growth"].items():
        print(f"{name}: per 10,000 messages (last 10,000): {g['per_10000_last']}; "
              f"text dump {g['dump_bytes']:,} bytes")
        print("  messages   tokens     df=1    df<=2   file bytes")
        for p in g["points"]:
            print(f"  {p['messages']:8,} {p['tokens']:8,} {p['df1']:8,} {p['df_le2']:8,} "
                  f"{p['file_bytes']:12,}")
    for corpus, b in result["bound"].items():
        print(f"{corpus}: chronological split, train {b['train']:,} / test {b['test']:,}")
        print("  bound                         (1-AUC)%  sm%@hm0.1%  error%    tokens   file bytes")
        for name, r in b["rows"].items():
            print(f"  {name:28} {r['1-auc%']:8.3f} {r['sm%@hm0.1%']:10.2f} {r['error%']:7.2f} "
                  f"{r['tokens']:9,} {r['file_bytes']:12,}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
