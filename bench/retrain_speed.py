"""How long retraining takes: 100 new messages into a model of the whole SpamAssassin corpus.

    python -m bench.retrain_speed [--repeats 3] [--json bench/results/retrain_speed.json]

SpamAssassin's files have no delivery order, so the corpus is put in a seeded
shuffle (random.Random(SEED) over the sorted paths); the last 100 messages are
the "new" ones and the first 5,947 the model's history. textnb and bogofilter
both start from a model of that history and learn the same 100 files, read
where they lie in the corpus (nothing is copied; the index and the bogofilter
database live in a temporary folder, deleted afterwards):

- ``textnb retrain --index NEW`` as a command (a fresh process: Python, NumPy and
  spaCy start-up included), and in process, split into load / learn / save;
- ``bogofilter -C -d DB -s -B <spam files>`` then ``-n -B <ham files>`` on a
  copy of a database trained the same way (Berkeley DB: updates in place).

To show what the time is proportional to, the in-process learn step is also timed
for 100 new messages into models of 1,000, 3,000 and 5,947 messages, and for 25,
50 and 100 new messages into the full model. Every figure is the median of
--repeats runs, each on a fresh copy of the model.

One message at a time: ``--regime thick``, ``textnb filter --learn`` and the online
benchmark score a message and then learn it before the next one. The same 100
messages go through ``retrain.learn_messages`` that way (``on_score``), into the
full model, and the cost per message is reported twice: with tokenising, and
without it (the tokens computed beforehand, as bench/online.py does), which leaves
the score-then-update step alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from textnb.mail.corpora import corpora_root, iter_corpus
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import retrain, store
from textnb.modelfile.lock import model_lock
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter

SEED = 2003
N_NEW = 100
HISTORIES = (1000, 3000)  # besides the whole corpus less the new messages
PROJECT = Path(__file__).resolve().parents[1]


def _index(path: Path, root: Path, examples) -> Path:
    path.write_text("".join(f"{e.label} {root / e.relpath}\n" for e in examples))
    return path


def _median(fn, repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def _timed(cmd: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _bogofilter_db(work: Path, root: Path, examples) -> Path:
    db = work / "bogo"
    db.mkdir()
    for label, flag in (("spam", "-s"), ("ham", "-n")):
        files = [str(root / e.relpath) for e in examples if e.label == label]
        subprocess.run(["bogofilter", "-C", "-d", str(db), flag, "-B", *files], check=True)
    return db


def _bogofilter_update(work: Path, db: Path, root: Path, new) -> float:
    copy = work / "bogo-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(db, copy)
    seconds = 0.0
    for label, flag in (("spam", "-s"), ("ham", "-n")):
        files = [str(root / e.relpath) for e in new if e.label == label]
        seconds += _timed(["bogofilter", "-C", "-d", str(copy), flag, "-B", *files])
    return seconds


def _in_process(model: Path, work: Path, new_index: Path) -> dict[str, float]:
    """One retrain with its phases timed (the steps of retrain.retrain, in order)."""
    copy = work / "copy.tnb"
    shutil.copy(model, copy)
    times = {}
    start = time.perf_counter()
    with model_lock(copy):
        t = time.perf_counter()
        spam_filter = store.load(copy)
        times["load"] = time.perf_counter() - t
        t = time.perf_counter()
        report = retrain.learn_messages(spam_filter, iter_index(new_index))
        times["learn"] = time.perf_counter() - t
        t = time.perf_counter()
        store.save(spam_filter, copy)
        times["save"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - start
    assert sum(report.learned.values()) == report.read, report
    return times


def _one_by_one(model: Path, work: Path, new_index: Path, tokens=None) -> float:
    """Milliseconds per message to score, then learn, each new message in turn."""
    spam_filter = store.load(model)
    messages = list(iter_index(new_index))
    original = SpamFilter.tokens
    if tokens is not None:
        SpamFilter.tokens = lambda self, raw: list(tokens[raw])
    try:
        start = time.perf_counter()
        retrain.learn_messages(spam_filter, messages, on_score=lambda message, score: None)
        seconds = time.perf_counter() - start
    finally:
        SpamFilter.tokens = original
    return round(1000 * seconds / len(messages), 2)


def _median_phases(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    root = corpora_root()
    if root is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    sa = root / "spamassassin"
    examples = sorted(iter_corpus("spamassassin", root), key=lambda e: e.relpath)
    random.Random(SEED).shuffle(examples)
    history, new = examples[:-N_NEW], examples[-N_NEW:]
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "load_average_at_start": [round(x, 1) for x in os.getloadavg()],
              "seed": SEED, "history": len(history), "new": len(new),
              "new_spam": sum(e.label == "spam" for e in new), "repeats": args.repeats}

    # Tokenise once to build the base models quickly; the timed runs below use the
    # real, uncached tokenizer.
    cache: dict[bytes, list[str]] = {}
    tokens = SpamFilter.tokens

    def memo(self, raw):
        if raw not in cache:
            cache[raw] = tokens(self, raw)
        return list(cache[raw])

    with tempfile.TemporaryDirectory(prefix="textnb-retrain-speed-") as tmp:
        work = Path(tmp)
        new_index = _index(work / "new-index", sa, new)
        models = {}
        SpamFilter.tokens = memo
        try:
            for size in (*HISTORIES, len(history)):
                spam_filter = SpamFilter()
                retrain.fit(spam_filter, (RawMessage(e.relpath, e.raw, e.label)
                                          for e in history[:size]))
                models[size] = store.save(spam_filter, work / f"history-{size}.tnb")
        finally:
            SpamFilter.tokens = tokens
        full = models[len(history)]
        result["model_bytes"] = full.stat().st_size
        result["vocabulary"] = len(store.load(full).vocabulary)

        _in_process(full, work, new_index)  # warm-up: loads spaCy
        runs = [_in_process(full, work, new_index) for _ in range(args.repeats)]
        result["textnb_in_process_s"] = _median_phases(runs)

        def cli():
            copy = work / "cli.tnb"
            shutil.copy(full, copy)
            return _timed([sys.executable, "-m", "textnb", "retrain", "--model", str(copy),
                           "--index", str(new_index)], cwd=PROJECT)

        result["textnb_command_s"] = round(_median(cli, args.repeats), 4)

        tokeniser = SpamFilter()
        tokens = {}
        for m in iter_index(new_index):
            tokens[normalise(m.raw)] = tokeniser.tokens(normalise(m.raw))
        result["one_by_one_ms_per_message"] = {
            "with_tokenising": _median(lambda: _one_by_one(full, work, new_index), args.repeats),
            "tokens_given": _median(lambda: _one_by_one(full, work, new_index, tokens),
                                    args.repeats)}

        scaling_history = {}
        for size, model in models.items():
            phases = [_in_process(model, work, new_index) for _ in range(args.repeats)]
            scaling_history[size] = _median_phases(phases)
        result["by_history_100_new"] = scaling_history
        scaling_new = {}
        for n in (25, 50, 100):
            index = _index(work / f"new-{n}", sa, new[:n])
            phases = [_in_process(full, work, index) for _ in range(args.repeats)]
            scaling_new[n] = _median_phases(phases)
        result["by_new_full_history"] = scaling_new

        if shutil.which("bogofilter"):
            version = subprocess.run(["bogofilter", "-V"], capture_output=True, text=True,
                                     check=True)
            result["bogofilter"] = version.stdout.splitlines()[0]
            db = _bogofilter_db(work, sa, history)
            result["bogofilter_s"] = round(_median(
                lambda: _bogofilter_update(work, db, sa, new), args.repeats), 4)
            result["ratio_command_vs_bogofilter"] = round(
                result["textnb_command_s"] / result["bogofilter_s"], 2)
            result["ratio_in_process_vs_bogofilter"] = round(
                result["textnb_in_process_s"]["total"] / result["bogofilter_s"], 2)
        else:
            result["bogofilter"] = "not installed: skipped"

    result["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
