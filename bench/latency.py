"""Per-message latency of the delivery paths, side by side on the same messages.

    python -m bench.latency [--n 200] [--model PATH] [--json OUT]

One run, one sample: ``--n`` messages spread evenly over the SpamAssassin test
split (the corpora README's md5 split), each piped, one process per message, through

- ``bogofilter -p -e`` (passthrough, like ``textnb filter``), with a database
  trained on the SpamAssassin train split;
- ``textnb filter --model M`` (loads spaCy and the model in every process);
- ``textnb-client --server SOCK`` talking to a ``textnb serve`` started once, as
  installed (console script), and again as ``python -S -m textnb.delivery.client``: without
  the site-packages start-up hooks (``.pth`` files), which cost tens of milliseconds
  on some machines and nothing on others;
- the compiled client (clients/textnb-client.c, built here with ``cc`` as
  ``make -C clients`` does) talking to the same scorer, and the same binary's
  ``--help``: the start-up of a C process, its floor;
- one exchange with the scorer from this process (``score_remote``: connect, send,
  the scorer's parse, tokenise and score, reply), no process start-up at all;
- ``python -c pass`` and ``python -S -c pass``: the interpreter's own start-up, the
  floor under any Python client on this machine.

For each message the paths run back to back in a rotating order, so machine load
hits them alike; ``--rounds R`` repeats that over the same messages (``textnb
filter``, 500 times bogofilter's time, only in the first round). Reported: median and
90th percentile wall time per message over all rounds, and the median over rounds
of each round's median's ratio to bogofilter's. Also the scorer's own time per
message (``score_with`` on the model loaded in this process, in the same rotation),
which the resident path pays on top of start-up.

The textnb model is trained on the train split unless ``--model`` names one. The
corpora are read in place and never copied; the bogofilter database and the socket
live in a temporary folder that is deleted afterwards.
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

from bench.delivery import (build_c_client, console_script, train_bogofilter, train_textnb,
                            wait_for_scorer)
from bench.stats import percentile
from textnb.mail.corpora import corpora_root, iter_corpus, split


def run(n: int, model: Path | None, workdir: Path, rounds: int = 1) -> dict:
    from textnb.delivery.client import score_remote

    root = corpora_root()
    train, test = split(iter_corpus("spamassassin"))
    test.sort(key=lambda e: e.relpath)
    step = max(1, len(test) // n)
    sample = [root / "spamassassin" / e.relpath for e in test[::step][:n]]
    if model is None:
        model = workdir / "sa.tnb"
        print(f"training textnb on {len(train):,} messages ...", flush=True)
        train_textnb(train, model)
    print(f"training bogofilter on {len(train):,} messages ...", flush=True)
    db = workdir / "bogofilter"
    train_bogofilter(root, train, db)

    sock = workdir / "scorer.sock"
    server = subprocess.Popen([*console_script("textnb", "textnb"), "serve", "--model", str(model),
                               "--socket", str(sock)], stderr=subprocess.PIPE)
    try:
        wait_for_scorer(sock, server)
        client_args = ["--server", str(sock), "--no-fallback", "--model", str(model)]
        paths = {
            "bogofilter -p -e": (["bogofilter", "-C", "-d", str(db), "-p", "-e"], b"X-Bogosity:"),
            "textnb filter": ([*console_script("textnb", "textnb"), "filter", "--model", str(model)],
                              b"X-TextNB-Status:"),
            "textnb-client -> serve": (
                [*console_script("textnb-client", "textnb.delivery.client"), *client_args],
                b"X-TextNB-Status:"),
            "python -S -m textnb.delivery.client -> serve": (
                [sys.executable, "-S", "-m", "textnb.delivery.client", *client_args],
                b"X-TextNB-Status:"),
            "python -c pass": ([sys.executable, "-c", "pass"], None),
            "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], None),
        }
        c_client = build_c_client(workdir)
        if c_client is not None:
            paths["textnb-client (C) -> serve"] = ([str(c_client), *client_args],
                                                   b"X-TextNB-Status:")
            paths["textnb-client (C) --help"] = ([str(c_client), "--help"], None)
        # Not processes (callable "commands"): the exchange alone, as the clients make it,
        # and the scoring alone, as the scorer does it; the difference is the scorer's
        # per-request overhead (thread, socket, protocol).
        paths["one exchange, from this process"] = (
            lambda raw: score_remote(str(sock), raw, timeout=30.0), None)
        paths["scoring only, as in the scorer"] = (_in_process_scorer(model), None)
        # -S leaves site-packages off sys.path: find textnb (not its dependencies) by path.
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        times = {name: [[] for _ in range(rounds)] for name in paths}
        for r in range(rounds):
            names = [name for name in paths if r == 0 or name != "textnb filter"]
            print(f"round {r + 1}/{rounds}: {len(sample)} messages x {len(names)} paths ...",
                  flush=True)
            for i, path in enumerate(sample):
                _time_one(path, paths, names[i % len(names):] + names[:i % len(names)],
                          times, r, env)
                if (i + 1) % 50 == 0:
                    print(f"  {i + 1} messages", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    rows = {}
    for name, per_round in times.items():
        every = [t for one in per_round for t in one]
        ratios = [statistics.median(one) / statistics.median(bogo)
                  for one, bogo in zip(per_round, times["bogofilter -p -e"]) if one]
        rows[name] = {"median_ms": 1000 * statistics.median(every),
                      "p90_ms": 1000 * percentile(every, 0.9),
                      "ratio_to_bogofilter": statistics.median(ratios),
                      "ratio_per_round": ratios}
    commands = {name: " ".join(cmd) for name, (cmd, _) in paths.items() if not callable(cmd)}
    return {"n_messages": len(sample), "rounds": rounds, "model": str(model),
            "commands": commands, "results": rows}


def _time_one(path: Path, paths: dict, order: list[str], times: dict, r: int, env: dict) -> None:
    """One message through each path in ``order``; its wall time appended to times[name][r]."""
    raw = path.read_bytes()
    for name in order:
        cmd, marker = paths[name]
        if callable(cmd):
            start = time.perf_counter()
            cmd(raw)
            times[name][r].append(time.perf_counter() - start)
            continue
        with open(path, "rb") as stdin:
            start = time.perf_counter()
            done = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env)
            times[name][r].append(time.perf_counter() - start)
        if marker is not None and not (done.returncode in (0, 1, 2) and marker in done.stdout):
            raise RuntimeError(f"{name} failed on {path} (exit {done.returncode}): "
                               f"{done.stderr.decode(errors='replace')[:300]}")


def _in_process_scorer(model: Path):
    """score_with on a model loaded and warmed up here, as the scorer's own."""
    from textnb.delivery.server import WARM_UP
    from textnb.delivery.verdict_headers import score_with
    from textnb.modelfile import store

    spam_filter = store.load(model)
    score_with(spam_filter, WARM_UP)
    return lambda raw: score_with(spam_filter, raw)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="messages in the sample")
    parser.add_argument("--model", type=Path, help="a textnb model trained on the train split")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time the sample this many times (textnb filter: first round only)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    if shutil.which("bogofilter") is None:
        sys.exit("bogofilter is not installed (apt-get install bogofilter)")
    with tempfile.TemporaryDirectory(prefix="textnb-latency-") as tmp:
        result = run(args.n, args.model, Path(tmp), args.rounds)
    print(f"\n{result['n_messages']} SpamAssassin test messages, one process each, "
          f"{result['rounds']} round(s):")
    print(f"{'path':<38} {'median ms':>10} {'p90 ms':>10} {'x bogofilter':>13}")
    for name, row in result["results"].items():
        print(f"{name:<38} {row['median_ms']:>10.1f} {row['p90_ms']:>10.1f} "
              f"{row['ratio_to_bogofilter']:>13.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
