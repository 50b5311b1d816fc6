"""One ``textnb`` command, one process, its CPU split by stage from inside the run.

    python -m bench.command_stages OUT.json train --model M --index I --jobs 1
    python -m bench.command_stages OUT.json classify --model M --jobs 1 test

The stage functions are wrapped before the command starts, and each call's CPU time
(its thread's, ``time.thread_time``, less the wrapped calls inside it) is added to its
stage: parsing (``parse.parse_message``), tokenising (``EmailTokenizer.__call__``),
counting (``engines.counting.count_tokens`` and ``Counts.add_to``, the model's merge) or
scoring (``SpamFilter.log_odds_tokens``), reading the files, the ledger's plan
(normalising, digests), loading and saving the model, and spaCy's import. "Everything
else" is the process's CPU (``time.process_time``, every thread) less the stages: the
interpreter's start, the other imports, the ledger's bookkeeping, output.

A stage is charged its own thread's CPU, not the process's, because the model loads on a
second thread while spaCy is imported (``textnb.modelfile.load_in_background``); and not the calls
nested inside it, so spaCy's import, made at the tokenizer's first call, counts as start-up rather
than tokenising (about 0.25 s of each command). All parts come from one run, so the shares hold
however fast the machine is that minute; ``bench.stages`` also times each stage
alone, in memory, which on this shared machine moves 15-40% between runs
(docs/performance.md#how-these-figures-are-measured). The wrappers cost two clock reads a
call (a few ms a run).
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

SPENT: Counter = Counter()


# Per thread, the CPU of the timed calls running inside the current one (a stack).
_NESTED = threading.local()


def _charge(label: str, spent: float) -> None:
    """Add ``spent`` (this thread's CPU) to ``label``, less the timed calls inside it,
    and count it as nested time of the call around it, if any."""
    stack = _NESTED.stack
    inner = stack.pop()
    SPENT[label] += spent - inner
    if stack:
        stack[-1] += spent


def _enter() -> float:
    if not hasattr(_NESTED, "stack"):
        _NESTED.stack = []
    _NESTED.stack.append(0.0)
    return time.thread_time()


def _timed(label: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        start = _enter()
        try:
            return fn(*args, **kwargs)
        finally:
            _charge(label, time.thread_time() - start)
    return timed


def _wrap(owner, name: str, label: str) -> None:
    setattr(owner, name, _timed(label, getattr(owner, name)))


def _timed_iterator(label: str, fn):
    """A generator function whose every step is timed (reading: files are read lazily)."""
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        iterator = fn(*args, **kwargs)
        while True:
            start = _enter()
            try:
                item = next(iterator)
            except StopIteration:
                return
            finally:
                _charge(label, time.thread_time() - start)
            yield item
    return timed


def instrument() -> None:
    from textnb import spamfilter
    from textnb.engines import counting, local
    from textnb.mail import parse
    from textnb.modelfile import journal_or_rewrite, store
    from textnb.text import tokenize

    spamfilter.parse_message = _timed("parse", parse.parse_message)
    _wrap(tokenize.EmailTokenizer, "__call__", "tokenise")
    counting.count_tokens = _timed("count", counting.count_tokens)
    _wrap(counting.Counts, "add_to", "count")
    _wrap(spamfilter.SpamFilter, "log_odds_tokens", "score")
    local.read_planned = _timed_iterator("read", local.read_planned)
    _wrap(local._Planner, "plan", "plan (normalise, digest, ledger)")
    _wrap(store, "save", "save")
    _wrap(journal_or_rewrite, "save", "save")  # commit's rewrite calls it there
    _wrap(store, "load", "load")
    _wrap(store, "load_for_update", "load")
    # spaCy's import is start-up, wherever it happens: at the tokenizer's first call, or
    # beside the model's load (textnb.modelfile.load_in_background).
    for name in ("import_spacy_modules", "make_spacy_tokenizer", "lexical_attributes"):
        _wrap(tokenize, name, "spaCy import")


def main(argv: list[str]) -> None:
    usage = "usage:\n" + __doc__.split("\n\n")[1]
    if argv[:1] in (["-h"], ["--help"]):
        print(usage)
        sys.exit(0)
    if len(argv) < 2 or argv[0].startswith("-"):
        # Write no file: a first argument of "--help" had been taken for the output's path.
        sys.exit(usage)
    out, command = Path(argv[0]), argv[1:]
    instrument()
    from textnb.cli import app

    try:
        app(command, standalone_mode=False)
    finally:
        total = time.process_time()
        stages = {k: round(v, 3) for k, v in SPENT.most_common()}
        stages["everything else"] = round(total - sum(SPENT.values()), 3)
        out.write_text(json.dumps({"command": command, "cpu_s": round(total, 3),
                                   "stages": stages}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
