"""The ceiling that parsing and tokenising set, beside textnb's commands and bogofilter.

    python -m bench.ceiling [--corpus spamassassin] [--repeats 3] [--json OUT.json]

How close ``textnb train`` and ``classify`` can come to bogofilter's throughput has a
bound: whatever else changes, a textnb that parses mail as ``textnb.mail.parse`` does and
tokenises it with spaCy's rules cannot be faster than a process that only does that. This measures that process: it imports what the commands import to
tokenise (``textnb.mail.parse``, ``textnb.text.tokenize``, spaCy's blank pipeline), then reads
the split's files and parses and tokenises them in ``jobs`` processes (forked after
spaCy's load, each with the cold caches a worker starts with; the calling process
waits), and throws the tokens away. Its wall time, start-up included, is the floor
for a command run with that many processes.

Side by side in every round (the order rotating): the ceiling with one process and
with every core, ``textnb train --jobs 1`` and ``textnb train`` (the default: every
core), bogofilter's bulk training; and the same on the test split (``classify
--json``, bogofilter's bulk scoring). Reported: medians of the wall seconds and each
as a ratio of throughput to bogofilter's (its seconds / ours), and the share of the
ceiling each command reaches (ceiling seconds / command seconds). The load average
is recorded before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import peers
from textnb.mail.corpora import corpora_root

CEILING = r"""
import json, multiprocessing, sys, time
start = time.perf_counter()
from textnb.config import FilterConfig
from textnb.mail.parse import parse_message
from textnb.text.tokenize import EmailTokenizer
config = FilterConfig()
tokenizer = EmailTokenizer(config.tokenizer)
tokenizer.spacy  # loaded before the fork, as the commands' workers inherit it
limits = config.mail
paths = open(sys.argv[1]).read().split("\n")
jobs = int(sys.argv[2])

def work(part):
    n = 0
    for path in part:
        with open(path, "rb") as f:
            n += len(tokenizer(parse_message(f.read(), limits)))
    return n

ready = time.perf_counter()
size = -(-len(paths) // jobs)
parts = [paths[i:i + size] for i in range(0, len(paths), size)]
if jobs == 1:
    tokens = work(paths)
else:
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        tokens = sum(pool.map(work, parts, chunksize=1))
print(json.dumps({"start_s": ready - start, "work_s": time.perf_counter() - ready,
                  "tokens": tokens}))
"""


def _wall(cmd: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout


def rounds(s: peers.Split, repeats: int, cores: int) -> dict[str, list[float]]:
    """Wall seconds of every contender, ``repeats`` rounds in rotating order."""
    wd = s.workdir
    index = wd / "train.index"
    index.write_text("".join(f"spam {p}\n" for p in s.train_spam)
                     + "".join(f"ham {p}\n" for p in s.train_ham))
    (wd / "train.list").write_text("\n".join(s.train_spam + s.train_ham))
    (wd / "test.list").write_text("\n".join(s.test))
    textnb = [sys.executable, "-m", "textnb"]

    def ceiling(listing: str, jobs: int):
        return lambda: _wall([sys.executable, "-c", CEILING, listing, str(jobs)], wd)[0]

    def train(jobs: list[str]):
        def run():
            (wd / "m.tnb").unlink(missing_ok=True)
            return _wall([*textnb, "train", "--model", "m.tnb", "--index", index.name, "--json",
                          *jobs], wd)[0]
        return run

    def classify(jobs: list[str]):
        return lambda: _wall([*textnb, "classify", "--model", "m-ready.tnb", "--json", *jobs,
                              "test"], wd)[0]

    subprocess.run([*textnb, "train", "--model", "m-ready.tnb", "--index", index.name],
                   cwd=wd, check=True, capture_output=True)
    contenders = {
        "train ceiling, 1 process": ceiling("train.list", 1),
        f"train ceiling, {cores} processes": ceiling("train.list", cores),
        "textnb train --jobs 1": train(["--jobs", "1"]),
        "textnb train (default)": train([]),
        "classify ceiling, 1 process": ceiling("test.list", 1),
        f"classify ceiling, {cores} processes": ceiling("test.list", cores),
        "textnb classify --jobs 1": classify(["--jobs", "1"]),
        "textnb classify (default)": classify([]),
    }
    out: dict[str, list[float]] = {name: [] for name in contenders}
    out["bogofilter train"], out["bogofilter classify"] = [], []
    names = list(contenders)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            out[name].append(round(contenders[name](), 3))
        shutil.rmtree(wd / "bogofilter", ignore_errors=True)  # a fresh database each round
        bogo = peers.run_bogofilter(s)
        out["bogofilter train"].append(round(bogo.train_s, 3))
        out["bogofilter classify"].append(round(bogo.classify_s, 3))
    return out


def summary(walls: dict[str, list[float]], cores: int) -> dict[str, dict]:
    median = {name: statistics.median(v) for name, v in walls.items()}
    rows = {}
    for name, seconds in median.items():
        what = "train" if "train" in name else "classify"
        row = {"wall_s": seconds, "x_bogofilter": round(median[f"bogofilter {what}"] / seconds, 3)}
        if name.startswith("textnb"):
            one = "--jobs 1" in name
            floor = median[f"{what} ceiling, {'1 process' if one else f'{cores} processes'}"]
            row["of_ceiling"] = round(floor / seconds, 3)
        rows[name] = row
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="spamassassin")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        s = peers.write_split(args.corpus, Path(tmp))
        load_before = os.getloadavg()[0]
        walls = rounds(s, args.repeats, cores)
        load_after = os.getloadavg()[0]
    rows = summary(walls, cores)
    print(f"{args.corpus}: {len(s.train_spam) + len(s.train_ham):,} training, {len(s.test):,} "
          f"test messages; {cores} cores; load {load_before:.2f} -> {load_after:.2f}")
    for name, row in rows.items():
        share = f", {row['of_ceiling']:.0%} of its ceiling" if "of_ceiling" in row else ""
        print(f"  {name:34s} {row['wall_s']:7.2f} s  {row['x_bogofilter']:.2f}x bogofilter{share}")
    if args.json:
        args.json.write_text(json.dumps({"corpus": args.corpus, "cores": cores,
                                         "load_before": load_before, "load_after": load_after,
                                         "walls": walls, "summary": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
