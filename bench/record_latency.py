"""What recording verdicts (``textnb serve --record``) costs the scorer's clients.

    python -m bench.record_latency [--n 600] [--rounds 3] [--json OUT]

Two resident scorers in this process on the same model (trained on the SpamAssassin
train split, or the sample corpus when the public corpora are absent), one without a
recorder and one with ``--record`` into a temporary SQLite file. Each message of the
test split is sent to both, back to back, in alternating order (``score_remote``:
connect, send, score, reply) from a client process of its own, so the machine's
load hits them alike; the recording
scorer's writer thread meanwhile reads headers, computes the clues of verdicts in the
review band (holding the model's lock) and inserts. Reported: median and 90th
percentile per-message latency of each, and their ratios (on / off); and what the
recorder recorded and dropped. ``--control`` records on neither: the ratio an A/A run
gives, the noise the real ratio is read against.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.stats import percentile


def _messages(n: int):
    from textnb.mail.corpora import corpora_root, iter_corpus, split
    from textnb.mail.sources import RawMessage, iter_index

    if corpora_root() is not None:
        train, test = split(iter_corpus("spamassassin"))
        train = [RawMessage(e.relpath, e.raw, e.label) for e in train]
        test.sort(key=lambda e: e.relpath)
        step = max(1, len(test) // n)
        return "spamassassin", train, [e.raw for e in test[::step][:n]]
    sample = list(iter_index(Path(__file__).resolve().parents[1] / "corpora/sample/index"))
    return "sample", sample, [m.raw for m in sample] * max(1, n // len(sample))


_CLIENT = """
import json, sys, time
from pathlib import Path
from textnb.delivery.client import score_remote
folder, addresses, rounds = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
raws = [p.read_bytes() for p in sorted(folder.iterdir())]
servers = list(addresses.items())
times = {name: [] for name in addresses}
for _ in range(rounds):
    for i, raw in enumerate(raws):
        for name, address in (servers if i % 2 == 0 else servers[::-1]):
            started = time.perf_counter()
            score_remote(address, raw)
            times[name].append(time.perf_counter() - started)
print(json.dumps(times))
"""


def run(n: int, rounds: int, control: bool = False) -> dict:
    from textnb.delivery.server import ResidentModel, ScorerServer
    from textnb.modelfile import store
    from textnb.review.recorder import VerdictRecorder
    from textnb.spamfilter import SpamFilter

    corpus, train, test = _messages(n)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "model.tnb"
        store.save(SpamFilter().fit(train), model)
        recorder = VerdictRecorder(tmp / "verdicts.db").start()
        servers, stop = [], threading.Event()
        for name, rec in (("off", None), ("on", None if control else recorder)):
            server = ScorerServer(ResidentModel(model), str(tmp / f"{name}.sock"),
                                  reload_interval=0, recorder=rec).bind()
            threading.Thread(target=server.serve_forever, args=(stop,), daemon=True).start()
            servers.append((name, server))
        messages = tmp / "messages"
        messages.mkdir()
        for i, raw in enumerate(test):
            (messages / f"{i:05d}").write_bytes(raw)
        addresses = {name: server.bound_address for name, server in servers}
        # The client in a process of its own, as mail clients are: in this process it
        # would share the GIL with the recorder's writer, which no real client does.
        done = subprocess.run([sys.executable, "-c", _CLIENT, str(messages), json.dumps(addresses),
                               str(rounds)], capture_output=True, text=True, check=True)
        times = json.loads(done.stdout)
        time.sleep(1.0)
        stop.set()
        recorder.close()
        size = sum(f.stat().st_size for f in tmp.glob("verdicts.db*"))
    out = {"corpus": corpus, "messages": len(test), "rounds": rounds, "control": control,
           "recorded": recorder.counts, "store_bytes": size}
    for name, values in times.items():
        out[name] = {"median_ms": round(statistics.median(values) * 1000, 3),
                     "p90_ms": round(percentile(values, 0.9) * 1000, 3)}
    out["ratio_median"] = round(out["on"]["median_ms"] / out["off"]["median_ms"], 3)
    out["ratio_p90"] = round(out["on"]["p90_ms"] / out["off"]["p90_ms"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--control", action="store_true",
                        help="A/A: neither scorer records (what the ratio is by chance)")
    args = parser.parse_args()
    result = run(args.n, args.rounds, args.control)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
