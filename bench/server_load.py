"""The resident scorer under load: many clients at once, every verdict checked.

    python -m bench.server_load [--clients 200] [--rounds 5] [--model PATH]
                                [--max-clients 8] [--tcp] [--json OUT]

Starts ``textnb serve`` (a separate process, its default bounds unless told
otherwise) on a model trained on SpamAssassin's train split, or on the project's
sample corpus when the public corpora are absent. Then ``--clients`` threads
each send ``--rounds`` requests; all clients start each round together (a
barrier), so every round is a burst of ``--clients`` simultaneous connections,
more than ``--max-clients`` served at once, the rest waiting in the listen queue.
Each request carries a real message (the test split's, or the sample's),
taken in turn, and its verdict is compared with the one this process computes
in process with the same model: an error is a request that failed or a verdict
that differs.

Reported: requests sent and served (the scorer's own count, from PING), errors
by kind, throughput, latency per request (connect to reply: p50, p95, p99, max), the
scorer's CPU time per request beside this process's CPU time per message scoring the
same messages in process (the overhead of serving; CPU time, as wall time on a shared
machine is noise),
the machine's load average before and after, and the number of CPUs. The clients
are threads of one Python process sharing the machine with the scorer: their
latencies include waiting for the CPU and the GIL, which is the load a delivery
agent's clients would add too. JSON goes to bench/results/server-load.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from textnb.delivery.client import ScorerUnavailable, ping, score_remote
from textnb.mail.corpora import corpora_root, iter_corpus, split

SAMPLE = ROOT / "corpora" / "sample"
# Distinct messages the clients cycle through; each is scored once in process first.
POOL = 400


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def corpus() -> tuple[str, list, list[bytes]]:
    """(name, labelled training messages, messages to send)."""
    from textnb.mail.sources import RawMessage, iter_index, iter_messages

    if corpora_root() is not None:
        train, test = split(iter_corpus("spamassassin"))
        step = max(1, len(test) // POOL)
        return ("SpamAssassin (train split; test split sent)",
                [RawMessage(e.relpath, e.raw, e.label) for e in train],
                [e.raw for e in test[::step][:POOL]])
    messages = list(iter_index(SAMPLE / "index"))
    sent = [m.raw for m in messages] + [m.raw for m in iter_messages(SAMPLE / "unlabelled")]
    return "the sample corpus (all of it trained and sent)", messages, sent


def wait_for_scorer(address, server: subprocess.Popen, seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"textnb serve exited with {server.returncode}")
        try:
            ping(address, timeout=1.0)
            return
        except (ScorerUnavailable, FileNotFoundError):
            time.sleep(0.2)
    raise RuntimeError(f"textnb serve did not answer on {address} within {seconds:.0f} s")


def load(address, messages: list[bytes], expected: list, clients: int, rounds: int,
         timeout: float) -> dict:
    """Run the clients; returns latencies (s) and error counts."""
    latencies: list[float] = []
    errors: Counter = Counter()
    examples: dict[str, str] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(k: int) -> None:
        for r in range(rounds):
            i = (k + r * clients) % len(messages)
            barrier.wait()
            start = time.perf_counter()
            try:
                verdict = score_remote(address, messages[i], timeout=timeout)
                kind = None if verdict == expected[i] else "wrong verdict"
            except ScorerUnavailable as exc:
                kind, verdict = "unavailable", exc
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if kind:
                    errors[kind] += 1
                    examples.setdefault(kind, str(verdict)[:200])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"latencies": latencies, "errors": dict(errors), "error_examples": examples,
            "seconds": time.perf_counter() - start}


def run(args, workdir: Path) -> dict:
    from textnb.delivery.verdict_headers import score_with
    from textnb.modelfile import store
    from textnb.spamfilter import SpamFilter

    name, train, messages = corpus()
    model = args.model
    if model is not None:
        name = name.split(" (")[0] + " messages sent, to the given model"
    else:
        model = workdir / "model.tnb"
        print(f"training on {len(train):,} messages of {name} ...", flush=True)
        store.save(SpamFilter().fit(train), model)
    spam_filter = store.load(model)
    expected = [score_with(spam_filter, raw) for raw in messages]
    # Timed on a second pass: the clients send each message 2-3 times, so the scorer's
    # tokenizer caches are mostly warm too. CPU time, not wall time: the machine is shared.
    start = time.process_time()
    for raw in messages:
        score_with(spam_filter, raw)
    in_process = (time.process_time() - start) / len(messages)
    address = ("127.0.0.1", args.port) if args.tcp else str(workdir / "scorer.sock")
    command = [sys.executable, "-m", "textnb", "serve", "--model", str(model),
               "--max-clients", str(args.max_clients), "--timeout", str(args.server_timeout)]
    command += ["--tcp", f"127.0.0.1:{args.port}"] if args.tcp else ["--socket", address]
    server = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        wait_for_scorer(address, server)
        before = int(ping(address)["requests"])
        cpu_before = cpu_seconds(server.pid)
        load_before = os.getloadavg()
        print(f"{args.clients} clients x {args.rounds} rounds against {' '.join(command[3:])}",
              flush=True)
        result = load(address, messages, expected, args.clients, args.rounds, args.timeout)
        load_after = os.getloadavg()
        cpu_after = cpu_seconds(server.pid)
        served = int(ping(address)["requests"]) - before
    finally:
        server.terminate()
        server.wait(timeout=30)
    lat = [1000 * s for s in result["latencies"]]
    sent = args.clients * args.rounds
    return {
        "corpus": name, "model": str(model) if args.model else None,
        "messages": len(messages), "clients": args.clients, "rounds": args.rounds,
        "transport": "tcp loopback" if args.tcp else "unix socket",
        "server": {"max_clients": args.max_clients, "timeout_s": args.server_timeout},
        "client_timeout_s": args.timeout,
        "sent": sent, "served": served, "errors": sum(result["errors"].values()),
        "errors_by_kind": result["errors"], "error_examples": result["error_examples"],
        "seconds": round(result["seconds"], 3),
        "requests_per_s": round(sent / result["seconds"], 1),
        # CPU per request in the scorer (its threads, sockets, parsing of requests, and
        # the scoring) against CPU per message scoring the same messages in this process.
        "server_cpu_ms_per_request": (round(1000 * (cpu_after - cpu_before) / served, 2)
                                      if cpu_before is not None and served else None),
        "in_process_cpu_ms_per_message": round(1000 * in_process, 2),
        "latency_ms": {"p50": round(statistics.median(lat), 1),
                       "p95": round(_percentile(lat, 95), 1),
                       "p99": round(_percentile(lat, 99), 1), "max": round(max(lat), 1)},
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", type=Path, help="a model file (default: train one)")
    parser.add_argument("--max-clients", type=int, default=8, help="textnb serve --max-clients")
    parser.add_argument("--server-timeout", type=float, default=10.0, help="textnb serve --timeout")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="each client's timeout (textnb-client's default is 10 s)")
    parser.add_argument("--tcp", action="store_true", help="loopback TCP instead of a Unix socket")
    parser.add_argument("--port", type=int, default=17833)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "server-load.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="textnb-load-") as tmp:
        r = run(args, Path(tmp))
    lat = r["latency_ms"]
    print(f"{r['corpus']}: {r['messages']} distinct messages; {r['transport']}, "
          f"serve --max-clients {r['server']['max_clients']}")
    print(f"{r['clients']} concurrent clients x {r['rounds']} rounds: {r['sent']:,} requests sent, "
          f"{r['served']:,} served, {r['errors']} errors {r['errors_by_kind'] or ''}")
    print(f"{r['requests_per_s']:,} requests/s over {r['seconds']:.1f} s; latency ms p50 "
          f"{lat['p50']}, p95 {lat['p95']}, p99 {lat['p99']}, max {lat['max']}")
    print(f"CPU ms: {r['server_cpu_ms_per_request']} per request in the scorer, "
          f"{r['in_process_cpu_ms_per_message']} per message scored in process")
    print(f"load average before {r['loadavg_before']}, after {r['loadavg_after']} "
          f"({r['cpus']} CPUs)")
    for kind, text in r["error_examples"].items():
        print(f"  e.g. {kind}: {text}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(r, indent=2) + "\n")
    print(f"written to {args.json}")
    return 0 if r["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
