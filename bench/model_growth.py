"""How a model grows with mail, and what a bound on its size costs in accuracy.

    python -m bench.model_growth [--step 2500] [--json OUT]

Growth. SpamAssassin in delivery order, then Enron 1-3 in delivery order
(``textnb.mail.corpora.delivery_order``): one mailbox's years, then another's, 22,588
messages. They are learned through the ledger as ``textnb retrain`` learns them
(``retrain.learn_messages``), with the default settings, with word pairs and without
(``tokenizer.bigrams = false``), and with word pairs under the bound
(``textnb.modelfile.prune.prune`` with PRUNE_MAX_DF / PRUNE_KEEP_LAST, applied every --step
messages as ``textnb compact --prune`` would be). Every ``--step`` messages: the
tokens held, how many of them are in only one or two learned messages (df 1,
df <= 2), and the model file's size (``store.dumps``: the compressed arrays and the
ledger); at the end also the text dump's size. "Per 10,000" is the growth over the
last 10,000 messages.

Bound, chronological. Per corpus, the corpora README's chronological split (per
class by date, the latest fifth is the test part); the training part learned in
date order, the bound applied once at the end, and the test part scored: (1-AUC)%,
sm% at hm 0.1% and the default threshold's error % (``bench.common.measures``,
as bench/learning_curve.py reports them), tokens and model-file bytes against the
unbounded model.

Bound, online. Per corpus, delivery order in the TREC manner (bench/online.py: each
message scored by the model as it stands, then learned), the bound applied every
``--every`` learned messages (as a compaction would); (1-AUC)% and sm% at hm 0.1%
of the online scores, final tokens and file bytes.

Messages are tokenised once (the tokenizer is deterministic) and learned from the
cache.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import TokenCache, measures
from textnb.config import load_config
from textnb.evaluation import metrics
from textnb.mail.corpora import chronological_split, corpora_root, delivery_order, iter_corpus
from textnb.mail.sources import RawMessage
from textnb.modelfile import dump, store
from textnb.modelfile.prune import PRUNE_KEEP_LAST, PRUNE_MAX_DF, prune
from textnb.modelfile.retrain import learn_messages
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter

CORPORA = ("spamassassin", "enron")
# (k, N): drop tokens in <= k learned messages unless in the last N learned ones.
BOUNDS = ((1, 0), (PRUNE_MAX_DF, PRUNE_KEEP_LAST), (2, 2000), (2, 0))
ONLINE_BOUNDS = ((PRUNE_MAX_DF, PRUNE_KEEP_LAST), (2, 2000))



def _messages(corpus: str, cache: dict[bytes, list[str]], tokenizer: SpamFilter
              ) -> list[RawMessage]:
    """The corpus in delivery order (relpath as source), each message tokenised once
    into ``cache`` under its normalised bytes (what retrain digests and tokenises)."""
    out = []
    for e in delivery_order(corpus, iter_corpus(corpus)):
        norm = normalise(e.raw)
        if norm not in cache:
            cache[norm] = tokenizer.tokens(norm)
        out.append(RawMessage(e.relpath, e.raw, e.label))
    return out


def _point(spam_filter: SpamFilter, n: int) -> dict:
    df = spam_filter.counts()["doc_freq"]
    return {"messages": n, "tokens": int((df > 0).sum()), "df1": int((df == 1).sum()),
            "df_le2": int((df <= 2).sum()), "file_bytes": len(store.dumps(spam_filter))}


GROWTH_RUNS = {True: (("pairs", None),
                      (f"pairs, df<={PRUNE_MAX_DF} not in last {PRUNE_KEEP_LAST}",
                       (PRUNE_MAX_DF, PRUNE_KEEP_LAST))),
               False: (("no_pairs", None),)}


def growth(stream: list[RawMessage], step: int, bigrams: bool) -> dict:
    out = {}
    for name, bound in GROWTH_RUNS[bigrams]:
        f = SpamFilter(load_config(None, {"tokenizer.bigrams": bigrams}))
        points = []
        for start in range(0, len(stream), step):
            learn_messages(f, stream[start:start + step])
            if bound:
                f, _ = prune(f, *bound)
            points.append(_point(f, min(start + step, len(stream))))
            print(f"  {name}: {points[-1]}", file=sys.stderr, flush=True)
        last, back = points[-1], next(p for p in reversed(points)
                                      if p["messages"] <= points[-1]["messages"] - 10_000)
        span = last["messages"] - back["messages"]
        per_10k = {k: round((last[k] - back[k]) * 10_000 / span)
                   for k in ("tokens", "file_bytes")}
        out[name] = {"points": points, "per_10000_last": per_10k,
                     "dump_bytes": len(dump.dumps(f))}
    return out


def _row(spam_filter: SpamFilter, test) -> dict:
    return {**measures(spam_filter, test), "tokens": len(spam_filter.vocabulary),
            "file_bytes": len(store.dumps(spam_filter))}


def bound(corpus: str, messages: list[RawMessage], cache) -> dict:
    by_path = {m.source: m for m in messages}
    train_e, test_e = chronological_split(corpus, list(iter_corpus(corpus)))
    train = [by_path[e.relpath] for e in train_e]
    test = [(m.label, cache[normalise(m.raw)]) for m in (by_path[e.relpath] for e in test_e)]
    full = SpamFilter()
    learn_messages(full, train)
    rows = {"none": _row(full, test)}
    for k, n in BOUNDS:
        rows[f"df<={k}, not in last {n}"] = _row(prune(full, k, n)[0], test)
    return {"train": len(train), "test": len(test), "rows": rows}


def online(messages: list[RawMessage], every: int) -> dict:
    rows = {}
    for k, n in ((None, None), *ONLINE_BOUNDS):
        f, scores, start = SpamFilter(), [], time.perf_counter()
        for at in range(0, len(messages), every):
            learn_messages(f, messages[at:at + every],
                           on_score=lambda m, s: scores.append(0.0 if s is None else s))
            if k is not None:
                f, _ = prune(f, k, n)
        y = np.array([m.label == "spam" for m in messages])
        s = np.array(scores)
        name = "none" if k is None else f"df<={k}, not in last {n}"
        rows[name] = {"1-auc%": round(metrics.one_minus_auc_pct(y, s), 4),
                      "sm%@hm0.1%": round(metrics.sm_at_hm(y, s), 3),
                      "error%": round(100 * float(np.mean((s > 0) != y)), 3),
                      "tokens": len(f.vocabulary), "file_bytes": len(store.dumps(f)),
                      "seconds": round(time.perf_counter() - start)}
        print(f"  online {name}: {rows[name]}", file=sys.stderr, flush=True)
    return {"n": len(messages), "every": every, "rows": rows}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=int, default=2500)
    parser.add_argument("--every", type=int, default=1000,
                        help="online: apply the bound every this many messages")
    parser.add_argument("--skip-online", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("the public corpora are absent: set TEXTNB_CORPORA")
    start = time.perf_counter()
    cache: dict[bytes, list[str]] = {}
    tokenizer = SpamFilter()
    per_corpus = {c: _messages(c, cache, tokenizer) for c in CORPORA}
    print(f"tokenised in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    result = {"load_average_at_start": [round(x, 1) for x in __import__("os").getloadavg()]}
    with TokenCache(cache, pairs=True):
        result["bound"] = {c: bound(c, per_corpus[c], cache) for c in CORPORA}
        if not args.skip_online:
            result["online"] = {c: online(per_corpus[c], args.every) for c in CORPORA}
    stream = [m for c in CORPORA for m in per_corpus[c]]
    result["growth"] = {}
    for pairs in (True, False):
        with TokenCache(cache, pairs=pairs):
            result["growth"].update(growth(stream, args.step, pairs))
    result["seconds"] = round(time.perf_counter() - start)
    for name, g in result["growth"].items():
        print(f"{name}: per 10,000 messages (last 10,000): {g['per_10000_last']}; "
              f"text dump {g['dump_bytes']:,} bytes")
        print("  messages   tokens     df=1    df<=2   file bytes")
        for p in g["points"]:
            print(f"  {p['messages']:8,} {p['tokens']:8,} {p['df1']:8,} {p['df_le2']:8,} "
                  f"{p['file_bytes']:12,}")
    for part in ("bound", "online"):
        for corpus, b in result.get(part, {}).items():
            head = (f"chronological split, train {b['train']:,} / test {b['test']:,}"
                    if part == "bound" else f"online, {b['n']:,} messages, bound every "
                    f"{b['every']:,}")
            print(f"{corpus}: {head}")
            print("  bound                      (1-AUC)%  sm%@hm0.1%  error%    tokens   file bytes")
            for name, r in b["rows"].items():
                print(f"  {name:25} {r['1-auc%']:8.3f} {r['sm%@hm0.1%']:10.2f} "
                      f"{r['error%']:7.2f} {r['tokens']:9,} {r['file_bytes']:12,}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
