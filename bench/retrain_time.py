"""Where the time of a small retrain goes, with the whole-file rewrite and with the journal.

    python -m bench.retrain_time [--repeats 3] [--json OUT]

Models. 5,000: the first 5,000 SpamAssassin messages in a seeded shuffle
(random.Random(2003) over the sorted paths, as bench/retrain_speed.py). 50,000: every
message of SpamAssassin, Enron 1-3, Ling-Spam and the SMS collection (31,055 less the
new ones), then perturbed copies of the SpamAssassin and Enron messages until 50,000:
copy k of a message is the message with a line ``copy k`` appended, so a new digest,
whose tokens are the original's plus three of its own (``copy:k``, ``copy:k:N``,
``copy:N``, N the message's number), the few once-seen tokens a new message brings.
Both are learned through the ledger (``retrain.learn_messages``) from tokens
computed once.

New mail: 1, 10 and 100 SpamAssassin messages from the last 100 of the shuffle (in
neither model). Each run starts from a fresh copy of the model file (no journal) and
times the steps of ``retrain.retrain`` in process: load (``store.load_for_update``),
tokenise (the new messages' tokens, with a warm tokenizer), count (the rest of
``learn_messages``), then the write: ``rewrite`` (the whole file, atomically: what
every retrain did before the journal) or ``journal`` (``store.commit``: one record
appended, whatever its size; the record's bytes are reported, so that the runs
``count_patch.COMPACT_FRACTION`` would send to a rewrite can be told). Start-up is timed apart: a
fresh ``python -c`` that imports the CLI and builds the tokenizer
(what every ``textnb retrain`` command pays first). Medians of
--repeats runs.

Loading with a journal: 1-message records appended to the 50,000 model (in memory,
``count_patch.diff`` then ``Journal.append``), load timed at 0, 100 and 300 records.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import TokenCache
from textnb.mail.corpora import corpora_root, iter_corpus
from textnb.mail.sources import RawMessage
from textnb.modelfile import count_patch, retrain, store
from textnb.modelfile.journal import Record, journal_path
from textnb.modelfile.lock import model_lock
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter

SEED = 2003
N_NEW = (1, 10, 100)
SIZES = (5_000, 50_000)
OTHER_CORPORA = ("enron", "lingspam", "sms")
JOURNAL_RECORDS = (0, 100, 300)


def _examples(name: str) -> list:
    try:
        return list(iter_corpus(name))
    except (KeyError, ValueError, FileNotFoundError):
        return []


def _history(size: int, base: list[RawMessage], cache: dict, tokenizer: SpamFilter
             ) -> list[RawMessage]:
    out = list(base[:size])
    originals = [m for m in base if m.source.split("/")[0] in ("spamassassin", "enron")]
    k = 0
    while len(out) < size:
        k += 1
        for i, m in enumerate(originals):
            if len(out) == size:
                break
            raw = m.raw.rstrip(b"\n") + f"\ncopy {k}\n".encode()
            tokens = cache[normalise(m.raw)] + [f"copy:{k}", f"copy:{k}:{i}", f"copy:{i}"]
            cache[normalise(raw)] = tokens
            out.append(RawMessage(f"{m.source}#copy{k}", raw, m.label))
    return out


def _phases(model: Path, work: Path, new: list[RawMessage], write: str) -> dict[str, float]:
    copy = work / "copy.tnb"
    shutil.copy(model, copy)
    journal_path(copy).unlink(missing_ok=True)
    times = {}
    start = time.perf_counter()
    with model_lock(copy):
        t = time.perf_counter()
        spam_filter, state = store.load_for_update(copy)
        before = count_patch.Snapshot.of(spam_filter)
        times["load"] = time.perf_counter() - t
        t = time.perf_counter()
        spam_filter.tokens_many([normalise(m.raw) for m in new])
        times["tokenise"] = time.perf_counter() - t
        t = time.perf_counter()
        report = retrain.learn_messages(spam_filter, new)
        times["count"] = time.perf_counter() - t - times["tokenise"]
        # time the append
        fraction, count_patch.COMPACT_FRACTION = count_patch.COMPACT_FRACTION, 1e9
        try:
            t = time.perf_counter()
            how = store.commit(spam_filter, copy, before, state, rewrite=write == "rewrite")
            times["write"] = time.perf_counter() - t
        finally:
            count_patch.COMPACT_FRACTION = fraction
    times["total"] = time.perf_counter() - start
    times["journal_bytes"] = (journal_path(copy).stat().st_size
                              if write == "journal" else 0)
    assert how == ("rewritten" if write == "rewrite" else "journal"), how
    assert sum(report.learned.values()) == len(new), report
    return times


def _startup(repeats: int) -> float:
    code = "import textnb.cli; from textnb.spamfilter import SpamFilter; SpamFilter().tokenizer"

    def once():
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True,
                       cwd=Path(__file__).resolve().parents[1])
        return time.perf_counter() - start

    return round(statistics.median(once() for _ in range(repeats)), 3)


def _journal_load(model: Path, work: Path, extra: list[RawMessage], cache) -> dict:
    copy = work / "journal.tnb"
    shutil.copy(model, copy)
    journal_path(copy).unlink(missing_ok=True)
    spam_filter, state = store.load_for_update(copy)
    journal = store.journal(copy)
    out = {}
    done = 0
    for target in JOURNAL_RECORDS:
        while done < target:
            before = count_patch.Snapshot.of(spam_filter)
            with TokenCache(cache):
                retrain.learn_messages(spam_filter, [extra[done]])
            state.seq = journal.append(Record("PATCH", None, count_patch.encode(
                count_patch.diff(before, spam_filter))), state.seq)
            done += 1
        start = time.perf_counter()
        loaded = store.load(copy)
        out[target] = {"load_s": round(time.perf_counter() - start, 3),
                       "journal_bytes": journal.path.stat().st_size if target else 0,
                       "file_bytes": copy.stat().st_size}
        assert len(loaded.ledger) == len(spam_filter.ledger)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("the public corpora are absent: set TEXTNB_CORPORA")
    result = {"load_average_at_start": [round(x, 1) for x in os.getloadavg()],
              "repeats": args.repeats}
    sa = sorted(iter_corpus("spamassassin"), key=lambda e: e.relpath)
    random.Random(SEED).shuffle(sa)
    new_examples, sa = sa[-100:], sa[:-100]
    examples = [("spamassassin", e) for e in sa] + [
        (name, e) for name in OTHER_CORPORA for e in _examples(name)]
    tokenizer = SpamFilter()
    cache: dict[bytes, list[str]] = {}
    base = []
    start = time.perf_counter()
    for name, e in examples:
        norm = normalise(e.raw)
        if norm not in cache:
            cache[norm] = tokenizer.tokens(norm)
        base.append(RawMessage(f"{name}/{e.relpath}", e.raw, e.label))
    result["tokenise_history_s"] = round(time.perf_counter() - start)
    new = [RawMessage(e.relpath, e.raw, e.label) for e in new_examples]
    # extra 1-message records for the journal's load cost: perturbed new messages
    extra = []
    for i in range(max(JOURNAL_RECORDS)):
        m = new[i % len(new)]
        raw = m.raw.rstrip(b"\n") + f"\nextra {i}\n".encode()
        cache[normalise(raw)] = tokenizer.tokens(normalise(m.raw)) + [f"extra:{i}"]
        extra.append(RawMessage(f"extra{i}", raw, m.label))

    with tempfile.TemporaryDirectory(prefix="textnb-retrain-time-") as tmp:
        work = Path(tmp)
        models = {}
        for size in SIZES:
            history = _history(size, base, cache, tokenizer)
            spam_filter = SpamFilter()
            with TokenCache(cache):
                retrain.learn_messages(spam_filter, history)
            models[size] = store.save(spam_filter, work / f"history-{size}.tnb")
            result[f"model_{size}"] = {"file_bytes": models[size].stat().st_size,
                                       "tokens": len(spam_filter.vocabulary),
                                       "ledger": len(spam_filter.ledger)}
            print(f"model {size}: {result[f'model_{size}']}", file=sys.stderr, flush=True)
            del spam_filter, history
        result["startup_s"] = _startup(args.repeats)
        _phases(models[SIZES[0]], work, new[:1], "journal")  # warm-up: the tokenizer
        runs = {}
        for size in SIZES:
            for n in N_NEW:
                for write in ("rewrite", "journal"):
                    phases = [_phases(models[size], work, new[:n], write)
                              for _ in range(args.repeats)]
                    row = {k: round(statistics.median(p[k] for p in phases), 4)
                           for k in phases[0]}
                    runs[f"{size} + {n} ({write})"] = row
                    print(f"{size} + {n} ({write}): {row}", file=sys.stderr, flush=True)
        result["runs"] = runs
        result["journal_load_50000"] = _journal_load(models[50_000], work, extra, cache)
    result["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    print(f"start-up (process, imports, tokenizer): {result['startup_s']} s")
    print("model + new (write)          load  tokenise  count   write   total  + start-up  record")
    for name, r in runs.items():
        print(f"{name:26} {r['load']:6.3f} {r['tokenise']:8.3f} {r['count']:6.3f} "
              f"{r['write']:7.3f} {r['total']:7.3f}  {r['total'] + result['startup_s']:7.3f}"
              f"  {int(r['journal_bytes']):8,}")
    for k, v in result["journal_load_50000"].items():
        print(f"50,000 model load with {k} one-message journal records: {v}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
