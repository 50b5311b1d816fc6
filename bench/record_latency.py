"""What recording verdicts (``textnb serve --record``) costs the scorer's clients.

    python -m bench.record_latency [--n 600] [--rounds 3] [--json OUT]

Two resident scorers in this process on the same model (trained on the SpamAssassin
train split, or the sample corpus when the public corpora are absent), one without a
recorder and one with ``--record`` into a temporary SQLite file. Each message of the
test split is sent to both, back to back, in alternating order (``score_remote``:
connect, send, score, reply), so the machine's load hits them alike; the recording
scorer's writer thread meanwhile reads headers, computes the clues of verdicts in the
review band (holding the model's lock) and inserts. Reported: median and 90th
percentile per-message latency of each, and their ratios (on / off); and what the
recorder recorded and dropped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.stats import percentile


def _messages(n: int):
    from textnb.corpora import corpora_root, iter_corpus, split
    from textnb.sources import RawMessage, iter_index

    if corpora_root() is not None:
        train, test = split(iter_corpus("spamassassin"))
        train = [RawMessage(e.relpath, e.raw, e.label) for e in train]
        test.sort(key=lambda e: e.relpath)
        step = max(1, len(test) // n)
        return "spamassassin", train, [e.raw for e in test[::step][:n]]
    sample = list(iter_index(Path(__file__).resolve().parents[1] / "corpora/sample/index"))
    return "sample", sample, [m.raw for m in sample] * max(1, n // len(sample))


def run(n: int, rounds: int) -> dict:
    from textnb import store
    from textnb.client import score_remote
    from textnb.pipeline import SpamFilter
    from textnb.review.recorder import VerdictRecorder
    from textnb.server import ResidentModel, ScorerServer

    corpus, train, test = _messages(n)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "model.tnb"
        store.save(SpamFilter().fit(train), model)
        recorder = VerdictRecorder(tmp / "verdicts.db").start()
        servers, stop = [], threading.Event()
        for name, rec in (("off", None), ("on", recorder)):
            server = ScorerServer(ResidentModel(model), str(tmp / f"{name}.sock"),
                                  reload_interval=0, recorder=rec).bind()
            threading.Thread(target=server.serve_forever, args=(stop,), daemon=True).start()
            servers.append((name, server))
        times = {"off": [], "on": []}
        for _ in range(rounds):
            for i, raw in enumerate(test):
                order = servers if i % 2 == 0 else servers[::-1]
                for name, server in order:
                    started = time.perf_counter()
                    score_remote(server.bound_address, raw)
                    times[name].append(time.perf_counter() - started)
        time.sleep(1.0)
        stop.set()
        recorder.close()
        size = sum(f.stat().st_size for f in tmp.glob("verdicts.db*"))
    out = {"corpus": corpus, "messages": len(test), "rounds": rounds,
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
    args = parser.parse_args()
    result = run(args.n, args.rounds)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
