"""The two HTML renderers side by side: CPU time on a corpus's HTML parts and of
parse_message over its training split, interleaved rounds in one process; with
--paired, the test scores of both on one split and a paired bootstrap of the metrics.

    python -m bench.html_renderers [--corpus spamassassin] [--rounds 3]
        [--json docs/results/html-renderers-speed.json]
    python -m bench.html_renderers --paired [--corpus spamassassin] [--resamples 2000]
    python -m bench.html_renderers --shapes [--tags 10000]

The HTML parts are the strings parse_message hands its renderer (decoded, as in a
real run), captured once from the training split of the corpora README's hash split.
Each round times both renderers on all of them and parse_message on every training
message with each ``parse.html_renderer``, the order of the two swapped every round,
so a change in the machine's load falls on both. The load average is recorded before
and after: compare the two columns of one run, not runs on different days.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import test_scores, tokenised_split
from bench.stats import paired_bootstrap
from textnb.config import load_config
from textnb.mail import parse
from textnb.mail.corpora import corpora_root, iter_corpus, split
from textnb.mail.html_lexbor import lexbor_to_text
from textnb.mail.html_text import html_to_text
from textnb.spamfilter import SpamFilter

RENDERERS = {"stdlib": html_to_text, "lexbor": lexbor_to_text}


def html_parts(raws: list[bytes]) -> list[tuple[str, int]]:
    """(markup, max_chars) of every HTML part, as parse_message calls its renderer."""
    parts: list[tuple[str, int]] = []

    def capture(markup: str, max_chars: int | None = None):
        parts.append((markup, max_chars))
        return html_to_text(markup, max_chars)

    parse.html_to_text = capture  # the stdlib renderer's one call site in parse._Body
    try:
        for raw in raws:
            parse.parse_message(raw, parse.MailLimits(html_renderer="stdlib"))
    finally:
        parse.html_to_text = html_to_text
    return parts


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def run(corpus: str, rounds: int) -> dict:
    train, _ = split(iter_corpus(corpus))
    raws = [e.raw for e in train]
    parts = html_parts(raws)
    limits = {name: parse.MailLimits(html_renderer=name) for name in RENDERERS}
    times: dict[str, dict[str, list[float]]] = {"render": {}, "parse_message": {}}
    load_before = os.getloadavg()
    for i in range(rounds):
        order = list(RENDERERS) if i % 2 == 0 else list(RENDERERS)[::-1]
        for name in order:
            render = RENDERERS[name]
            times["render"].setdefault(name, []).append(
                cpu(lambda render=render: [render(m, c) for m, c in parts]))
        for name in order:
            times["parse_message"].setdefault(name, []).append(
                cpu(lambda name=name: [parse.parse_message(raw, limits[name]) for raw in raws]))
    return {"corpus": corpus, "messages": len(raws), "html_parts": len(parts),
            "html_chars": sum(len(m) for m, _ in parts), "rounds": rounds,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "cpu_seconds": {stage: {name: [round(t, 3) for t in ts] for name, ts in by.items()}
                            for stage, by in times.items()}}


def paired(corpus: str, chronological: bool, resamples: int) -> dict:
    """Both renderers on one split: how many messages tokenise differently, and the
    bootstrap of (1-AUC)% and sm% at hm 0.1%, lexbor - stdlib (negative: lexbor better)."""
    runs = {}
    for name in RENDERERS:
        cfg = load_config(overrides={"parse.html_renderer": name})
        tokens, y, n_train, _ = tokenised_split(corpus, SpamFilter(cfg), chronological)
        runs[name] = (tokens, test_scores(tokens, y, n_train, cfg)[0])
    # y and n_train: the split's, the same for both renderers.
    (stdlib_tokens, stdlib_scores), (lexbor_tokens, lexbor_scores) = runs["stdlib"], runs["lexbor"]
    differ = [sorted(a) != sorted(b) for a, b in zip(stdlib_tokens, lexbor_tokens)]
    boot = paired_bootstrap(y[n_train:], lexbor_scores, stdlib_scores, resamples)
    return {"corpus": corpus, "split": "chronological" if chronological else "hash",
            "messages_tokenised_differently": sum(differ),
            "test_messages_tokenised_differently": sum(differ[n_train:]),
            "max_abs_test_log_odds_diff": float(np.abs(lexbor_scores - stdlib_scores).max()),
            "lexbor_minus_stdlib": {
                metric: {"stdlib": v["bogofilter"], "lexbor": v["textnb"],
                         "diff_ci95": v["diff_ci95"], "lexbor_better_share": v["textnb_better_share"],
                         "tie_share": v["tie_share"]} for metric, v in boot.items()}}


# The crafted markup that costs Lexbor's tree builder most (docs/html-to-text.md), each
# as a function of n repeats; --shapes builds each at --tags '<' characters.
SHAPES = {
    "text in a table after unclosed <i id=N>":
        lambda n: "".join(f"<i id={i}>" for i in range(n)) + "<table>" + "x" * n,
    "a table after unclosed <b id=N>":
        lambda n: ("".join(f"<b id={i}>" for i in range(n))
                   + "<table><tr><td>x</td></tr></table>" * 50),
    "<select> then <option>x repeated": lambda n: "<select>" + "<option>x" * n,
    "unclosed <font color=N>, then </p> repeated":
        lambda n: "".join(f"<font color={i}>" for i in range(n)) + "</p>" * n,
    "<ul><li> repeated": lambda n: "<ul><li>" * n,
}


def shapes(tags: int) -> dict:
    """CPU-s of the Lexbor renderer on each shape at ``tags`` tags (its budget lifted)."""
    out = {}
    for name, make in SHAPES.items():
        n = 1
        while make(2 * n).count("<") <= tags:
            n *= 2
        low, high = n, 2 * n  # the largest n whose markup has at most `tags` tags
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if make(mid).count("<") <= tags else (low, mid)
        markup = make(low)
        out[name] = round(cpu(lambda markup=markup: lexbor_to_text(markup, max_tags=tags)), 3)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--paired", action="store_true",
                        help="accuracy instead of speed: both splits, a paired bootstrap")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--shapes", action="store_true",
                        help="the tree builder's worst crafted markup instead")
    parser.add_argument("--tags", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.shapes:
        for name, seconds in shapes(args.tags).items():
            print(f"{seconds:6.3f} CPU-s  {name}, {args.tags:,} tags")
        return
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    if args.paired:
        results = [paired(args.corpus, chronological, args.resamples)
                   for chronological in (False, True)]
        print(json.dumps(results, indent=1))
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        return
    result = run(args.corpus, args.rounds)
    print(f"{result['corpus']}: {result['messages']} training messages, {result['html_parts']} "
          f"HTML parts, {result['html_chars'] / 1e6:.1f} M characters; load "
          f"{result['load_before'][0]} -> {result['load_after'][0]}")
    for stage, by in result["cpu_seconds"].items():
        cells = "   ".join(f"{name} {min(ts):.2f}-{max(ts):.2f}" for name, ts in by.items())
        print(f"  {stage:<14} CPU-s per pass, {result['rounds']} rounds: {cells}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
