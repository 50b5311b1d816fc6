"""Training and scoring on Dask against the single process, on the SpamAssassin corpus.

    python -m bench.dask_scaling [--workers 1 2] [--partitions 2 8 32 128] [--json OUT]

All in one run, on this machine:
- throughput of ``textnb train`` (through the ledger) in one process, and on a
  LocalCluster of 1 and 2 single-threaded worker processes (each warmed first: the
  one-off ~4-10 s of importing spaCy in a fresh worker is not throughput);
- that the models are identical (every member of the model files, byte for byte);
- scoring throughput (``evaluate``) in one process and on the largest cluster;
- the merge as the number of partitions grows: the leaves are counted first, then
  the tree merge alone is timed, with the distinct tokens each level carries;
- each worker's peak memory (VmHWM).
Needs the shared corpora (../shared/corpora or $TEXTNB_CORPORA) and dask[distributed].
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from textnb import commands
from textnb.config import FilterConfig
from textnb.engines import dask as dd
from textnb.engines.dask import DaskEngine
from textnb.mail.corpora import corpora_root
from textnb.spamfilter import SpamFilter

SPAM = ("spam", "spam_2")
HAM = ("easy_ham", "easy_ham_2", "hard_ham")
SAMPLE_INDEX = Path(__file__).resolve().parents[1] / "corpora" / "sample" / "index"


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), MB (runs on the workers)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds() -> float:
    """CPU time of this process and its children so far (runs on the workers too)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def merge_cost(client, files, n_partitions: int) -> dict:
    """Count the leaves, wait, then time the tree merge alone."""
    from distributed import wait

    parts = dd.partition(files, n_partitions)
    digested = client.gather(client.map(dd._digest_partition, parts, pure=False))
    plans, _, _ = dd.plan_run(digested, SpamFilter().ledger)
    config = FilterConfig()
    start = time.perf_counter()
    leaves = [client.submit(dd.count_partition, part, config, plan, pure=False)
              for part, plan in zip(parts, plans)]
    pairs = client.map(dd._pair, leaves, pure=False)
    wait(pairs)
    count_seconds = time.perf_counter() - start
    leaf_vocab = client.gather(client.map(lambda p: len(p[0].tokens), pairs, pure=False))
    leaf_stream = client.gather(client.map(lambda p: int(p[0].doc_freq.sum()), pairs, pure=False))
    start = time.perf_counter()
    root = dd._tree_merge(client, pairs, dd._merge_partials)
    plus, _ = root.result()
    merge_seconds = time.perf_counter() - start
    # The same merges in this one process: their CPU cost without scheduling and transfers.
    level = client.gather(pairs)
    cpu = time.process_time()
    while len(level) > 1:
        level = [group[0] if len(group) == 1 else dd._merge_partials(*group)
                 for group in dd.partition(level, -(-len(level) // dd.SPLIT_EVERY))]
    merge_cpu_seconds = time.process_time() - cpu
    levels = 0
    n = len(parts)
    while n > 1:
        n = -(-n // dd.SPLIT_EVERY)
        levels += 1
    return {"partitions": len(parts), "merge_levels": levels,
            "count_seconds": round(count_seconds, 2), "merge_seconds": round(merge_seconds, 3),
            "merge_cpu_seconds_one_process": round(merge_cpu_seconds, 3),
            "merge_share_pct": round(100 * merge_seconds / (count_seconds + merge_seconds), 2),
            "messages_per_partition": round(sum(len(p.label) for p in plans) / len(parts), 1),
            "leaf_tokens_distinct": sum(leaf_vocab),
            "leaf_tokens_per_message_sets": sum(leaf_stream),
            "vocabulary": len(plus.tokens)}


def main(argv=None) -> int:
    from distributed import Client, LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--partitions", type=int, nargs="+", default=[2, 8, 32, 128])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    root = corpora_root()
    if root is None:
        print("the shared corpora are absent (../shared/corpora or $TEXTNB_CORPORA)")
        return 1
    base = root / "spamassassin"
    spam = [str(base / f) for f in SPAM]
    ham = [str(base / f) for f in HAM]
    files = dd.labelled_files(spam, ham)
    out = Path(tempfile.mkdtemp(prefix="textnb-dask-"))
    config = FilterConfig()
    result: dict = {"corpus": "spamassassin", "files": len(files), "cores": os.cpu_count()}

    SpamFilter(config).tokens(b"Subject: warm\n\nimport spaCy before timing")
    start, cpu = time.perf_counter(), cpu_seconds()
    local = commands.train(out / "local.tnb", config, spam, ham)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    n = sum(local["messages"].values()) + local["duplicates"]
    result["messages"] = n
    result["local_train"] = {"seconds": round(seconds, 2), "msgs_per_s": round(n / seconds, 1),
                             "cpu_seconds": round(cpu, 2), "msgs_per_cpu_s": round(n / cpu, 1)}
    print(f"local train: {n} messages in {seconds:.1f} s, {n / seconds:.0f} msg/s; "
          f"{n / cpu:.0f} msg per CPU-s", flush=True)
    start, cpu = time.perf_counter(), cpu_seconds()
    local_eval = commands.evaluate(out / "local.tnb", spam=spam, ham=ham)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    result["local_evaluate"] = {"seconds": round(seconds, 2), "msgs_per_s": round(n / seconds, 1),
                                "msgs_per_cpu_s": round(n / cpu, 1)}
    print(f"local evaluate: {seconds:.1f} s, {n / seconds:.0f} msg/s; "
          f"{n / cpu:.0f} msg per CPU-s", flush=True)

    result["dask"] = []
    for workers in args.workers:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            commands.train(out / "warm.tnb", config, index=[str(SAMPLE_INDEX)],
                           engine=DaskEngine(client))
            path = out / f"dask{workers}.tnb"
            cpu = sum(client.run(cpu_seconds).values())
            start = time.perf_counter()
            summary = commands.train(path, config, spam, ham, engine=DaskEngine(client))
            seconds = time.perf_counter() - start
            cpu = sum(client.run(cpu_seconds).values()) - cpu
            identical = members(path) == members(out / "local.tnb")
            row = {"workers": workers, "partitions": summary["partitions"],
                   "seconds": round(seconds, 2), "msgs_per_s": round(n / seconds, 1),
                   "msgs_per_worker_s": round(n / seconds / workers, 1),
                   "worker_cpu_seconds": round(cpu, 2), "msgs_per_worker_cpu_s": round(n / cpu, 1),
                   "digest_seconds": summary["digest_seconds"],
                   "speedup_vs_local": round(result["local_train"]["seconds"] / seconds, 2),
                   "identical_model": identical}
            print(f"dask {workers} worker(s): {seconds:.1f} s, {n / seconds:.0f} msg/s, "
                  f"{n / cpu:.0f} msg per worker CPU-s, identical={identical}", flush=True)
            cpu = sum(client.run(cpu_seconds).values())
            start = time.perf_counter()
            evaluation = commands.evaluate(path, spam=spam, ham=ham, engine=DaskEngine(client))
            seconds = time.perf_counter() - start
            cpu = sum(client.run(cpu_seconds).values()) - cpu
            row["evaluate_seconds"] = round(seconds, 2)
            row["evaluate_msgs_per_s"] = round(n / seconds, 1)
            row["evaluate_msgs_per_worker_cpu_s"] = round(n / cpu, 1)
            row["evaluate_identical"] = evaluation == local_eval
            print(f"  evaluate: {seconds:.1f} s, {n / seconds:.0f} msg/s, "
                  f"identical={evaluation == local_eval}", flush=True)
            row["worker_peak_rss_mb"] = sorted(round(v) for v in client.run(peak_rss_mb).values())
            if workers == max(args.workers):
                result["merge"] = []
                for p in args.partitions:
                    cost = merge_cost(client, files, p)
                    result["merge"].append(cost)
                    print(f"  {p:4d} partitions: counting {cost['count_seconds']:.1f} s, merge "
                          f"{cost['merge_seconds'] * 1000:.0f} ms ({cost['merge_levels']} levels; "
                          f"{cost['merge_cpu_seconds_one_process'] * 1000:.0f} ms CPU in one "
                          "process), "
                          f"leaf vocabularies {cost['leaf_tokens_distinct']:,} tokens vs "
                          f"{cost['leaf_tokens_per_message_sets']:,} in per-message sets",
                          flush=True)
            result["dask"].append(row)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
