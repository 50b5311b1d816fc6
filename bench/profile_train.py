"""Where training time goes: cProfile over SpamFilter.fit, summed by stage.

    python -m bench.profile_train [--corpus spamassassin] [--limit N] [--stats OUT.prof]

Trains a filter on the corpus's train split (the corpora README's md5 split) in
this process under cProfile, then prints the cumulative time of each stage's
entry point (parsing, HTML, the stdlib email parser, tokenising, spaCy's
tokenizer, the matrix, the counts) and the functions with the most own time.
The profiler's clock is CPU time (the machine is shared), and it inflates
Python-level work (every call is timed), so read the shares and compare runs with
each other; the unprofiled CPU throughput of a first, separate run is printed too.

The profiler's shares overstate pure-Python stages (html.parser, the email
feedparser) against C ones (spaCy's Cython tokenizer). So the stages are also
timed without it, each alone on the same messages (CPU seconds, best of
--repeats): parse_message; inside it, the stdlib parser and the HTML rendering
of the HTML parts parse_message met; tokenising the parsed messages with a new
tokenizer (cold caches, as training sees them).
"""

from __future__ import annotations

import argparse
import cProfile
import email
import email.policy
import os
import pstats
import sys
import time
from pathlib import Path

from textnb.mail import parse
from textnb.mail.corpora import CORPORA, corpora_root, iter_corpus, split
from textnb.mail.parse import parse_message
from textnb.mail.sources import RawMessage
from textnb.spamfilter import SpamFilter

# (label, file name ending, function name): the entry point of each stage.
STAGES = [
    ("parse (parse.parse_message)", "textnb/mail/parse.py", "parse_message"),
    ("  stdlib email parser", "email/parser.py", "parsebytes"),
    ("  HTML to text", "textnb/mail/html_text.py", "html_to_text"),
    ("tokenise (EmailTokenizer.__call__)", "textnb/text/tokenize.py", "__call__"),
    ("  spaCy Tokenizer.__call__", "spacy/tokenizer.pyx", "__call__"),
    ("  header fields", "textnb/text/tokenize.py", "header_tokens"),
    ("matrix (Vocabulary.transform)*", "textnb/features/vectorize.py", "transform"),
    ("counts (model.partial_fit)", "textnb/models/naive_bayes.py", "partial_fit"),
]


def _keys(stats: pstats.Stats, path: str, name: str) -> list[tuple]:
    return [key for key in stats.stats
            if key[2] == name and key[0].replace(os.sep, "/").endswith(path)]


def stage_times(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Cumulative seconds of each stage's entry point (0 when it never ran).

    * Vocabulary.transform once pulled its token lists from a generator, so its
    cumulative time held the parsing and tokenising; what it spent in generators of
    textnb/spamfilter.py is taken off.
    """
    out = []
    for label, path, name in STAGES:
        keys = _keys(stats, path, name)
        total = sum(stats.stats[key][3] for key in keys)
        if label.endswith("*"):
            for (file, _, func), (_, _, _, _, callers) in stats.stats.items():
                if func == "<genexpr>" and file.endswith("spamfilter.py"):
                    total -= sum(callers[key][3] for key in keys if key in callers)
        out.append((label, total))
    return out


def _cpu(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def unprofiled_stages(raws: list[bytes], repeats: int) -> list[tuple[str, float]]:
    """CPU seconds of each stage run alone, without the profiler's overhead."""
    html_parts: list[tuple] = []
    render = parse.html_to_text

    def keep(*args, **kwargs):  # the HTML parts (and parse_message's bounds) as met
        html_parts.append((args, kwargs))
        return render(*args, **kwargs)

    parse.html_to_text = keep
    try:
        parsed = [parse_message(raw) for raw in raws]
    finally:
        parse.html_to_text = render
    tokenizer = SpamFilter().tokenizer
    compat32 = email.policy.compat32
    return [
        ("parse (parse.parse_message)", _cpu(lambda: [parse_message(r) for r in raws], repeats)),
        ("  stdlib email parser", _cpu(
            lambda: [email.message_from_bytes(r, policy=compat32) for r in raws], repeats)),
        ("  HTML to text", _cpu(lambda: [render(*a, **k) for a, k in html_parts], repeats)),
        # Once: a second pass would find the tokenizer's caches warm.
        ("tokenise (EmailTokenizer.__call__)", _cpu(lambda: [tokenizer(p) for p in parsed], 1)),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=CORPORA, default="spamassassin")
    parser.add_argument("--limit", type=int, default=0, help="train on the first N messages only")
    parser.add_argument("--stats", type=Path, help="also save the raw profile here")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each unprofiled stage (the fastest is kept)")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA", file=sys.stderr)
        return 1
    train, _ = split(iter_corpus(args.corpus))
    messages = [RawMessage(e.relpath, e.raw, e.label) for e in train[: args.limit or None]]
    SpamFilter().tokens(messages[0].raw)  # start-up (spaCy's import) is not what is measured
    start = time.process_time()
    SpamFilter().fit(messages)
    cpu = time.process_time() - start
    profile = cProfile.Profile(time.process_time)
    profile.runcall(SpamFilter().fit, messages)
    stats = pstats.Stats(profile)
    if args.stats:
        stats.dump_stats(args.stats)
    total = stats.total_tt
    print(f"{args.corpus}: {len(messages):,} messages; unprofiled {cpu:.1f} s CPU "
          f"({len(messages) / cpu:.0f} msgs/s), profiled {total:.1f} s CPU; "
          f"load average {os.getloadavg()[0]:.1f}")
    for label, seconds in stage_times(stats):
        print(f"  {label:<38} {seconds:>7.2f} s  {100 * seconds / total:>5.1f}%")
    stages = unprofiled_stages([m.raw for m in messages], args.repeats)
    total = stages[0][1] + stages[-1][1]
    print(f"\neach stage alone, unprofiled (CPU s, best of {args.repeats}; "
          f"% of parse + tokenise, {total:.1f} s):")
    for label, seconds in stages:
        print(f"  {label:<38} {seconds:>7.2f} s  {100 * seconds / total:>5.1f}%")
    print("\nmost own time:")
    stats.sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
