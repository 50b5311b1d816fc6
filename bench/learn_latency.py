"""Learning one message: through the resident scorer, by `textnb retrain`, by bogofilter.

    python -m bench.learn_latency [--n 40] [--rounds 3] [--retrain-n 8] [--json OUT]

What a Dovecot IMAPSieve script pays when a user moves one message into or out of
Junk (docs/learning.md), on a SpamAssassin-sized model: textnb trained on the
SpamAssassin train split (the corpora README's md5 split, 4,814 messages), bogofilter's
database on the same messages. ``--n`` messages spread evenly over the test split are
learned under their own labels, one process per message, by

- the compiled client (clients/textnb-client.c, built here as ``make -C clients``
  does): ``textnb-client --learn spam|ham`` talking to a ``textnb serve`` started once;
- the Python client, as installed (console script), to the same scorer;
- one learn exchange from this process (``learn_remote``: no process start-up), the
  scorer's own cost;
- ``bogofilter -s`` / ``-n`` (register as spam / ham) on its database;
- ``textnb retrain --model COPY --spam|--ham FILE`` (loads spaCy and the model and
  rewrites it: seconds), ``--retrain-n`` messages, first round only.

Every path learns a message new to its model: each gets its own variant of the message
(one header line naming the path added), so the ledger never answers "known" for a
message another path taught the scorer. The scorer runs with its default
``--flush-seconds 1``: while messages keep coming it rewrites the model file about once
a second (0.6 s of CPU for this model), which the learn requests share the machine
with, as they would in use. Paths run back to back per message in a rotating order, so
load hits them alike; each round repeats the sample with new variants. Reported: median
and 90th percentile wall time over all rounds, and the median over rounds of the ratio
of each round's median to bogofilter's, plus the load average before and after.
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

BOGOFILTER = "bogofilter -s|-n"
RETRAIN = "textnb retrain (one message)"


def variant(raw: bytes, tag: str) -> bytes:
    """The message with one header line added at the top: new to every ledger."""
    return f"X-Learn-Bench: {tag}\n".encode() + raw


def run(n: int, rounds: int, retrain_n: int, workdir: Path) -> dict:
    from textnb.delivery.client import learn_remote

    root = corpora_root()
    train, test = split(iter_corpus("spamassassin"))
    test.sort(key=lambda e: e.relpath)
    step = max(1, len(test) // n)
    sample = test[::step][:n]
    model = workdir / "sa.tnb"
    print(f"training textnb and bogofilter on {len(train):,} messages ...", flush=True)
    train_textnb(train, model)
    db = workdir / "bogofilter"
    train_bogofilter(root, train, db)
    retrain_model = workdir / "retrain.tnb"
    shutil.copyfile(model, retrain_model)
    c_client = build_c_client(workdir)

    sock = workdir / "scorer.sock"
    server = subprocess.Popen([*console_script("textnb", "textnb"), "serve", "--model", str(model),
                               "--socket", str(sock)], stderr=subprocess.PIPE)
    paths: dict[str, object] = {}
    if c_client is not None:
        paths["textnb-client (C) --learn -> serve"] = lambda label, f: [
            str(c_client), "--server", str(sock), "--learn", label]
    paths["textnb-client (Python) --learn -> serve"] = lambda label, f: [
        *console_script("textnb-client", "textnb.delivery.client"), "--server", str(sock),
        "--learn", label]
    paths[BOGOFILTER] = lambda label, f: ["bogofilter", "-C", "-d", str(db),
                                          "-s" if label == "spam" else "-n"]
    paths[RETRAIN] = lambda label, f: [*console_script("textnb", "textnb"), "retrain", "--model",
                                       str(retrain_model), f"--{label}", str(f)]
    exchange = "one learn exchange, from this process"
    times: dict[str, list[list[float]]] = {name: [[] for _ in range(rounds)]
                                           for name in [*paths, exchange]}
    load_before = os.getloadavg()
    try:
        wait_for_scorer(sock, server)
        for r in range(rounds):
            names = [name for name in paths if name != RETRAIN or r == 0] + [exchange]
            print(f"round {r + 1}/{rounds}: {len(sample)} messages x {len(names)} paths ...",
                  flush=True)
            for i, example in enumerate(sample):
                order = names[i % len(names):] + names[:i % len(names)]
                for name in order:
                    if name == RETRAIN and i >= retrain_n:
                        continue
                    raw = variant(example.raw, f"{name} round {r}")
                    if name == exchange:
                        start = time.perf_counter()
                        learn_remote(str(sock), raw, example.label, timeout=30.0)
                        times[name][r].append(time.perf_counter() - start)
                        continue
                    message = workdir / "message.eml"
                    message.write_bytes(raw)
                    with open(message, "rb") as stdin:
                        start = time.perf_counter()
                        done = subprocess.run(paths[name](example.label, message), stdin=stdin,
                                              capture_output=True)
                        times[name][r].append(time.perf_counter() - start)
                    if done.returncode != 0:
                        raise RuntimeError(f"{name} failed on {example.relpath} (exit "
                                           f"{done.returncode}): "
                                           f"{done.stderr.decode(errors='replace')[:300]}")
    finally:
        server.terminate()
        server.wait(timeout=60)
    load_after = os.getloadavg()

    rows = {}
    for name, per_round in times.items():
        every = [t for one in per_round for t in one]
        ratios = [statistics.median(one) / statistics.median(bogo)
                  for one, bogo in zip(per_round, times[BOGOFILTER]) if one]
        rows[name] = {"n": len(every), "median_ms": 1000 * statistics.median(every),
                      "p90_ms": 1000 * percentile(every, 0.9),
                      "ratio_to_bogofilter": statistics.median(ratios),
                      "ratio_per_round": ratios}
    return {"n_messages": len(sample), "rounds": rounds, "train_messages": len(train),
            "model_bytes": model.stat().st_size, "load_before": load_before,
            "load_after": load_after, "results": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="messages in the sample")
    parser.add_argument("--rounds", type=int, default=3, help="times the sample is learned")
    parser.add_argument("--retrain-n", type=int, default=8,
                        help="messages learned by textnb retrain (first round; ~1.5 s each)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    if shutil.which("bogofilter") is None:
        sys.exit("bogofilter is not installed (apt-get install bogofilter)")
    with tempfile.TemporaryDirectory(prefix="textnb-learn-latency-") as tmp:
        result = run(args.n, args.rounds, args.retrain_n, Path(tmp))
    print(f"\n{result['n_messages']} SpamAssassin test messages learned into a model of "
          f"{result['train_messages']:,} ({result['model_bytes'] / 1e6:.1f} MB), "
          f"{result['rounds']} round(s); load average "
          f"{result['load_before'][0]:.2f} before, {result['load_after'][0]:.2f} after:")
    print(f"{'path':<42} {'n':>4} {'median ms':>10} {'p90 ms':>10} {'x bogofilter':>13}")
    for name, row in result["results"].items():
        print(f"{name:<42} {row['n']:>4} {row['median_ms']:>10.1f} {row['p90_ms']:>10.1f} "
              f"{row['ratio_to_bogofilter']:>13.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
