"""One ``textnb`` command, one process, its CPU split by stage from inside the run.

    python -m bench.command_stages OUT.json train --model M --index I --jobs 1
    python -m bench.command_stages OUT.json classify --model M --jobs 1 test

The stage functions are wrapped before the command starts, and each call's CPU time
(user + system, ``time.process_time``) is added to its stage: parsing
(``mail.parse_message``), tokenising (``EmailTokenizer.__call__``), counting
(``engines.counting.count_tokens`` and ``Counts.add_to``, the model's merge) or
scoring (``SpamFilter.log_odds_tokens``), reading the files, the ledger's plan
(normalising, digests), loading and saving the model. "Everything else" is the
process's CPU less the stages: the interpreter's start, imports, spaCy's load, the
ledger's bookkeeping, output. All parts come from one run, so the shares hold
however fast the machine is that minute; ``bench.stages`` also times each stage
alone, in memory, which on this shared machine moves 15-40% between runs
(docs/benchmarks.md, "stop 25"). The wrappers cost two clock reads a call (a few ms
a run).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections import Counter
from pathlib import Path

SPENT: Counter = Counter()


def _timed(label: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[label] += time.process_time() - start
    return timed


def _wrap(owner, name: str, label: str) -> None:
    setattr(owner, name, _timed(label, getattr(owner, name)))


def _timed_iterator(label: str, fn):
    """A generator function whose every step is timed (reading: files are read lazily)."""
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        iterator = fn(*args, **kwargs)
        while True:
            start = time.process_time()
            try:
                item = next(iterator)
            except StopIteration:
                return
            finally:
                SPENT[label] += time.process_time() - start
            yield item
    return timed


def instrument() -> None:
    from textnb import mail, pipeline, store, tokenize
    from textnb.engines import counting, local

    pipeline.parse_message = _timed("parse", mail.parse_message)
    _wrap(tokenize.EmailTokenizer, "__call__", "tokenise")
    counting.count_tokens = _timed("count", counting.count_tokens)
    _wrap(counting.Counts, "add_to", "count")
    _wrap(pipeline.SpamFilter, "log_odds_tokens", "score")
    local.read_planned = _timed_iterator("read", local.read_planned)
    _wrap(local._Planner, "plan", "plan (normalise, digest, ledger)")
    _wrap(store, "save", "save")
    _wrap(store, "load", "load")


def main(argv: list[str]) -> None:
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
