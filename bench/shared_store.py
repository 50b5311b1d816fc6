"""The PostgreSQL shared store: learns per second, a scorer's latency, a host joining.

    python -m bench.shared_store [--learns 3000] [--scores 400] [--join 100000] [--json OUT]

Starts a private PostgreSQL (bench/postgres.py: initdb and pg_ctl in a temporary folder)
and measures, in one run:

- **learns per second**, one host and three at once: each host a process with a
  ``SharedStore`` of its own, teaching distinct messages, one transaction per message
  (a scorer's LEARN: the ledger decides, the log record is appended and notified, the
  commit is durable). The
  messages are synthetic token lists (Zipf-distributed words, 150 a message), made
  before the clock starts: this is the store's cost, not the tokenizer's;
- **a scorer's per-message latency**, ``textnb serve --model FILE`` against ``textnb serve
  --store URL``, the same model (the sample corpus trained into each) and the same
  messages, asked in alternation from one client in this process (``score_remote``):
  the median of each and their ratio. Both score from memory; the shared scorer also
  follows the log in a thread, which is what the ratio shows;
- **a host joining** a model of ``--join`` learned messages (synthetic, learned 1,000 a
  transaction, then folded into a snapshot, and 200 more in the log's tail): the seconds
  from starting a ``SharedModel`` until it answers a first verdict.

Run it on a quiet machine when the figures matter; it prints the ratios and the
machine's load average before and after, and writes JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.postgres import Cluster, skip_reason

PROJECT = Path(__file__).resolve().parents[1]
SAMPLE_INDEX = PROJECT / "corpora" / "sample" / "index"


def synthetic_items(n: int, seed: int, tokens_per_message: int = 150, words: int = 60_000):
    """``n`` distinct LEARN items of Zipf-distributed made-up words, both labels."""
    from textnb.models.ledger import tokens_hash
    from textnb.modelfile.postgres.database import Item
    from textnb.modelfile.postgres.records import message_counts

    import numpy as np

    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, words + 1)
    drawn = rng.choice(words, size=(n, tokens_per_message), p=p / p.sum())
    vocabulary = [f"w{k}" for k in range(words)]
    items = []
    for i in range(n):
        tokens = [vocabulary[k] for k in drawn[i].tolist()]
        digest = hashlib.sha256(f"{seed}:{i}".encode()).digest()
        items.append(Item("LEARN", digest, ("ham", "spam")[i % 2], *message_counts(tokens),
                          tokens_hash(tokens)))
    return items


def new_model(url: str, name: str):
    from textnb.config import FilterConfig
    from textnb.modelfile.postgres.database import SharedStore
    from textnb.modelfile.postgres.shared_model import new_filter_config

    store = SharedStore(url)
    model = store.create(name, new_filter_config(FilterConfig()))
    store.close()
    return model.id


def _host(url: str, model_id: int, n: int, seed: int, barrier, done) -> None:
    """One host, a process of its own: its messages made, then taught one per
    transaction from the moment every host is ready; puts when it finished."""
    from textnb.modelfile.postgres.database import SharedStore

    items = synthetic_items(n, seed)
    store = SharedStore(url)
    barrier.wait()
    for item in items:
        store.change(model_id, [item])
    done.put(time.monotonic())
    store.close()


def learns_per_second(url: str, n: int, hosts: int) -> float:
    """Learns per second of ``hosts`` processes teaching ``n`` messages in all."""
    import multiprocessing

    model_id = new_model(url, f"learn{hosts}")
    context = multiprocessing.get_context("fork")
    barrier, done = context.Barrier(hosts + 1), context.Queue()
    processes = [context.Process(target=_host, args=(url, model_id, n // hosts,
                                                     100 * hosts + h, barrier, done))
                 for h in range(hosts)]
    for p in processes:
        p.start()
    barrier.wait()
    start = time.monotonic()
    finished = [done.get(timeout=3600) for _ in processes]
    for p in processes:
        p.join()
    return hosts * (n // hosts) / (max(finished) - start)


def scorer_latency(url: str, workdir: Path, n: int) -> dict:
    from textnb import commands
    from textnb.commands import shared_store
    from textnb.config import FilterConfig
    from textnb.delivery.client import ScorerUnavailable, ping, score_remote
    from textnb.mail.sources import iter_index

    model = workdir / "sample.tnb"
    commands.train(model, FilterConfig(), index=[str(SAMPLE_INDEX)])
    shared_store.train(url, "sample", FilterConfig(), index=[str(SAMPLE_INDEX)])
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    sockets = {"file": str(workdir / "file.sock"), "shared": str(workdir / "shared.sock")}
    outbox = workdir / "outbox"
    servers = [subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model", str(model),
                                 "--socket", sockets["file"]], env=env,
                                stderr=subprocess.DEVNULL),
               subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--store", url,
                                 "--store-model", "sample", "--outbox", str(outbox),
                                 "--socket", sockets["shared"]], env=env,
                                stderr=subprocess.DEVNULL)]
    try:
        for sock in sockets.values():
            for _ in range(1200):
                try:
                    ping(sock, timeout=1.0)
                    break
                except ScorerUnavailable:
                    time.sleep(0.1)
        raws = [m.raw for m in iter_index(SAMPLE_INDEX)]
        times = {"file": [], "shared": []}
        for i in range(n):
            raw = raws[i % len(raws)]
            order = ("file", "shared") if i % 2 else ("shared", "file")
            for name in order:
                start = time.perf_counter()
                score_remote(sockets[name], raw)
                times[name].append(time.perf_counter() - start)
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=60)
    medians = {name: statistics.median(t[len(t) // 10:]) for name, t in times.items()}
    return {"median_ms": {k: round(v * 1000, 3) for k, v in medians.items()},
            "shared_over_file": round(medians["shared"] / medians["file"], 4)}


def join_seconds(url: str, n: int) -> dict:
    from textnb.delivery.verdict_headers import score_with
    from textnb.modelfile.postgres.database import SharedStore
    from textnb.modelfile.postgres.shared_model import SharedModel

    model_id = new_model(url, "join")
    store = SharedStore(url)
    start = time.perf_counter()
    for first in range(0, n, 1000):
        store.change(model_id, synthetic_items(min(1000, n - first), seed=7_000_000 + first))
    learned = time.perf_counter() - start
    folding = SharedModel(url, "join")
    folding.fold(force=True)
    folding.close()
    for k in range(200):  # the log's tail past the snapshot
        store.change(model_id, synthetic_items(1, seed=9_000_000 + k))
    store.close()
    start = time.perf_counter()
    joining = SharedModel(url, "join")
    score_with(joining.spam_filter, b"Subject: hello\n\nw1 w2 w3 w5 w8 w13\n")
    seconds = time.perf_counter() - start
    joining.close()
    return {"messages": n + 200, "learn_seconds": round(learned, 2),
            "join_seconds": round(seconds, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learns", type=int, default=3000)
    parser.add_argument("--scores", type=int, default=400)
    parser.add_argument("--join", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    reason = skip_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 1
    load_before = os.getloadavg()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the cluster is removed
    cluster = Cluster()
    cluster.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            url = cluster.create_database("bench")
            one = learns_per_second(url, args.learns // 3, 1)
            three = learns_per_second(url, args.learns, 3)
            print(f"learns/s: one host {one:.0f}, three hosts {three:.0f} "
                  f"(three over one {three / one:.2f})", flush=True)
            latency = scorer_latency(url, Path(folder), args.scores)
            print(f"scorer median latency: file {latency['median_ms']['file']} ms, shared "
                  f"{latency['median_ms']['shared']} ms (shared over file "
                  f"{latency['shared_over_file']})", flush=True)
            join = join_seconds(url, args.join)
            print(f"a host joining a model of {join['messages']:,} messages answers after "
                  f"{join['join_seconds']} s", flush=True)
    finally:
        cluster.remove()
    result = {"learns_per_second": {"one_host": round(one, 1), "three_hosts": round(three, 1)},
              "scorer_latency": latency, "join": join,
              "load_average": {"before": load_before, "after": os.getloadavg()}}
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
