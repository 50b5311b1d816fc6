"""Per-message latency of the delivery paths, side by side on the same messages.

    python bench/latency.py [--n 200] [--model PATH] [--json OUT]

One run, one sample: ``--n`` messages spread evenly over the SpamAssassin test
split (the corpora README's md5 split), each piped, one process per message, through

- ``bogofilter -p -e`` (passthrough, like ``textnb filter``), with a database
  trained on the SpamAssassin train split;
- ``textnb filter --model M`` (loads spaCy and the model in every process);
- ``textnb-client --server SOCK`` talking to a ``textnb serve`` started once, as
  installed (console script), and again as ``python -S -m textnb.client``: without
  the site-packages start-up hooks (``.pth`` files), which cost tens of milliseconds
  on some machines and nothing on others;
- ``python -c pass`` and ``python -S -c pass``: the interpreter's own start-up, the
  floor under any Python client on this machine.

For each message the paths run back to back in a rotating order, so machine load
hits them alike. Reported: median and 90th percentile wall time per message, and
each median's ratio to bogofilter's. Also the scorer's own time per message
(``score_with`` in this process), which the resident path pays on top of start-up.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textnb.corpora import corpora_root, iter_corpus, split  # noqa: E402

BIN = Path(sys.executable).parent


def _script(name: str, module: str) -> list[str]:
    """The installed console script beside this interpreter (not a pyenv shim), else -m."""
    path = BIN / name
    return [str(path)] if path.exists() else [sys.executable, "-m", module]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def train_textnb(train, model: Path) -> None:
    from textnb import store
    from textnb.pipeline import SpamFilter
    from textnb.sources import RawMessage

    spam_filter = SpamFilter().fit(RawMessage(e.relpath, e.raw, e.label) for e in train)
    store.save(spam_filter, model)


def train_bogofilter(root: Path, train, db: Path) -> None:
    db.mkdir()
    for label, flag in (("spam", "-s"), ("ham", "-n")):
        files = [str(root / "spamassassin" / e.relpath) for e in train if e.label == label]
        for i in range(0, len(files), 500):  # stay under the argument-length limit
            subprocess.run(["bogofilter", "-C", "-d", str(db), flag, "-B", *files[i:i + 500]],
                           check=True)


def wait_for_scorer(sock: Path, server: subprocess.Popen, seconds: float = 180.0) -> None:
    from textnb.client import ScorerUnavailable, ping

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"textnb serve exited with {server.returncode}: "
                               f"{server.stderr.read().decode(errors='replace')}")
        try:
            ping(str(sock), timeout=1.0)
            return
        except ScorerUnavailable:
            time.sleep(0.2)
    raise RuntimeError(f"textnb serve did not answer on {sock} within {seconds:.0f} s")


def run(n: int, model: Path | None, workdir: Path) -> dict:
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
    server = subprocess.Popen([*_script("textnb", "textnb"), "serve", "--model", str(model),
                               "--socket", str(sock)], stderr=subprocess.PIPE)
    try:
        wait_for_scorer(sock, server)
        client_args = ["--server", str(sock), "--no-fallback", "--model", str(model)]
        paths = {
            "bogofilter -p -e": (["bogofilter", "-C", "-d", str(db), "-p", "-e"], b"X-Bogosity:"),
            "textnb filter": ([*_script("textnb", "textnb"), "filter", "--model", str(model)],
                              b"X-TextNB-Status:"),
            "textnb-client -> serve": ([*_script("textnb-client", "textnb.client"), *client_args],
                                       b"X-TextNB-Status:"),
            "python -S -m textnb.client -> serve": (
                [sys.executable, "-S", "-m", "textnb.client", *client_args], b"X-TextNB-Status:"),
            "python -c pass": ([sys.executable, "-c", "pass"], None),
            "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], None),
        }
        # -S leaves site-packages off sys.path: find textnb (not its dependencies) by path.
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        times = {name: [] for name in paths}
        names = list(paths)
        print(f"timing {len(sample)} messages x {len(names)} paths ...", flush=True)
        for i, path in enumerate(sample):
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                cmd, marker = paths[name]
                with open(path, "rb") as stdin:
                    start = time.perf_counter()
                    done = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env)
                    times[name].append(time.perf_counter() - start)
                if marker is not None and not (done.returncode in (0, 1, 2)
                                               and marker in done.stdout):
                    raise RuntimeError(f"{name} failed on {path} (exit {done.returncode}): "
                                       f"{done.stderr.decode(errors='replace')[:300]}")
            if (i + 1) % 50 == 0:
                print(f"  {i + 1} messages", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    scoring = _scoring_times(model, sample)
    base = statistics.median(times["bogofilter -p -e"])
    rows = {name: {"median_ms": 1000 * statistics.median(t), "p90_ms": 1000 * _percentile(t, 0.9),
                   "ratio_to_bogofilter": statistics.median(t) / base}
            for name, t in times.items()}
    rows["scoring only, in the scorer"] = {
        "median_ms": 1000 * statistics.median(scoring), "p90_ms": 1000 * _percentile(scoring, 0.9),
        "ratio_to_bogofilter": statistics.median(scoring) / base}
    return {"n_messages": len(sample), "model": str(model), "commands":
            {name: " ".join(cmd) for name, (cmd, _) in paths.items()}, "results": rows}


def _scoring_times(model: Path, sample: list[Path]) -> list[float]:
    from textnb import store
    from textnb.filter import score_with

    spam_filter = store.load(model)
    score_with(spam_filter, b"Subject: warm-up\n\nwarm up\n")
    out = []
    for path in sample:
        raw = path.read_bytes()
        start = time.perf_counter()
        score_with(spam_filter, raw)
        out.append(time.perf_counter() - start)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="messages in the sample")
    parser.add_argument("--model", type=Path, help="a textnb model trained on the train split")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    if shutil.which("bogofilter") is None:
        sys.exit("bogofilter is not installed (apt-get install bogofilter)")
    with tempfile.TemporaryDirectory(prefix="textnb-latency-") as tmp:
        result = run(args.n, args.model, Path(tmp))
    print(f"\n{result['n_messages']} SpamAssassin test messages, one process each:")
    print(f"{'path':<38} {'median ms':>10} {'p90 ms':>10} {'x bogofilter':>13}")
    for name, row in result["results"].items():
        print(f"{name:<38} {row['median_ms']:>10.1f} {row['p90_ms']:>10.1f} "
              f"{row['ratio_to_bogofilter']:>13.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
