"""The resident scorer while slow clients attack it: no well-behaved request may fail.

    python -m bench.server_attack [--seconds 60] [--tricklers 200] [--clients 50]
                                  [--model PATH] [--json OUT]

Starts ``textnb serve`` (a separate process, its default bounds) on the project's sample
model, or on ``--model``. For ``--seconds``, ``--tricklers`` connections send a request
one byte every 0.2 s from one thread (a slowloris: each is dropped at the scorer's 10 s
deadline and connects again), while ``--clients`` threads each score messages in a loop,
one request after another, as delivery agents would; each verdict is compared with the
one computed in this process. Reported: well-behaved requests and failures (a failure
is any request not answered with the in-process verdict), their latency (connect to
reply: p50, p99, max), and the tricklers' connections. tests/test_daemon_attacks.py runs
the same load for 20 s; docs/security.md quotes this script's 60 s run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from textnb.delivery.client import PROTOCOL, ScorerUnavailable, score_remote

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "corpora" / "sample"


class Tricklers:
    """``n`` connections each sending a request one byte every ``every`` seconds, from one
    thread, connecting again whenever the scorer drops one. A context manager."""

    def __init__(self, address, n: int, every: float = 0.2):
        self.address, self.n, self.every = address, n, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tricklers")
        self.connects = 0

    def _connect(self) -> socket.socket:
        family = socket.AF_INET if isinstance(self.address, tuple) else socket.AF_UNIX
        conn = socket.socket(family, socket.SOCK_STREAM)
        conn.settimeout(1.0)
        try:
            conn.connect(self.address)
        except OSError:
            conn.close()
            raise
        conn.setblocking(False)
        return conn

    def _run(self) -> None:
        request = PROTOCOL + b" SCORE 100000\n" + b"x" * 100000
        conns: dict[int, list] = {}
        while not self.stop.is_set():
            for k in range(self.n):
                if k not in conns:
                    try:
                        conns[k] = [self._connect(), 0]
                        self.connects += 1
                    except OSError:
                        continue
                conn, sent = conns[k]
                try:
                    conns[k][1] += conn.send(request[sent:sent + 1])
                except BlockingIOError:
                    pass
                except OSError:  # dropped by the scorer: connect again next time round
                    conn.close()
                    del conns[k]
            self.stop.wait(self.every)
        for conn, _ in conns.values():
            conn.close()

    def __enter__(self) -> "Tricklers":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def load_run(address, seconds: float, tricklers: int, clients: int, messages, expected):
    """``clients`` threads scoring in a loop beside ``tricklers`` slow connections for
    ``seconds``. RETURNS (latencies in s of the well-behaved requests, their failures,
    the tricklers' connections)."""
    latencies: list[float] = []
    failures: list[str] = []
    stop = threading.Event()

    def client(k: int) -> None:
        i = k
        while not stop.is_set():
            n = i % len(messages)
            start = time.monotonic()
            try:
                verdict = score_remote(address, messages[n], timeout=10)
                latencies.append(time.monotonic() - start)
                if verdict != expected[n]:
                    failures.append(f"message {n}: {verdict}, in process {expected[n]}")
            except ScorerUnavailable as exc:
                failures.append(str(exc)[:200])
            i += clients

    with Tricklers(address, tricklers) as slow:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        stop.wait(seconds)
        stop.set()
        for t in threads:
            t.join(timeout=30)
    return latencies, failures, slow.connects


def percentile(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def wait_for_socket(path: Path, server: subprocess.Popen, seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"textnb serve did not start (exit {server.poll()})")
        time.sleep(0.1)


def run(args, workdir: Path) -> dict:
    from textnb.delivery.verdict_headers import score_with
    from textnb.mail.sources import iter_index, iter_messages
    from textnb.modelfile import store
    from textnb.spamfilter import SpamFilter

    model = args.model
    if model is None:
        model = workdir / "model.tnb"
        store.save(SpamFilter().fit(iter_index(SAMPLE / "index")), model)
    messages = [m.raw for m in iter_messages(SAMPLE / "unlabelled")]
    spam_filter = store.load(model)
    expected = [score_with(spam_filter, raw) for raw in messages]
    sock = workdir / "scorer.sock"
    server = subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model", str(model),
                               "--socket", str(sock)], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        wait_for_socket(sock, server)
        latencies, failures, connects = load_run(str(sock), args.seconds, args.tricklers,
                                                 args.clients, messages, expected)
        alive = server.poll() is None
    finally:
        server.terminate()
        server.wait(timeout=30)
    ms = [1000 * s for s in latencies]
    return {"seconds": args.seconds, "tricklers": args.tricklers, "clients": args.clients,
            "requests": len(ms), "failures": len(failures), "failure_examples": failures[:5],
            "latency_ms": {"p50": round(statistics.median(ms), 1),
                           "p99": round(percentile(ms, 99), 1), "max": round(max(ms), 1)},
            "trickler_connections": connects, "scorer_alive_at_end": alive,
            "cpus": os.cpu_count(), "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--tricklers", type=int, default=200)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--model", type=Path, help="a model file (default: the sample's)")
    parser.add_argument("--json", type=Path,
                        default=ROOT / "docs" / "results" / "server-attack.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="textnb-attack-") as tmp:
        r = run(args, Path(tmp))
    lat = r["latency_ms"]
    print(f"{r['tricklers']} trickling connections ({r['trickler_connections']} made) and "
          f"{r['clients']} clients for {r['seconds']:g} s: {r['requests']:,} requests, "
          f"{r['failures']} failed; latency ms p50 {lat['p50']}, p99 {lat['p99']}, "
          f"max {lat['max']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(r, indent=2) + "\n")
    print(f"written to {args.json}")
    return 0 if r["failures"] == 0 and r["scorer_alive_at_end"] else 1


if __name__ == "__main__":
    sys.exit(main())
