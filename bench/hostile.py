"""Time and peak memory of every hostile-catalogue case, each in its own process.

    python -m bench.hostile [--cases NAME ...] [--out bench/results/hostile.json]

Each case of tests/hostile_cases.py runs in a fresh Python process that trains the
small sample-corpus model, builds the case's bytes and then parses, tokenises and
classifies them (mbox cases: reads them through textnb.mail.sources first). The time is
that last step's (wall clock); the peak RSS is the whole process's, as the child
reads it from its own /proc/self/status (VmHWM) at the end, so it includes the
interpreter, spaCy, the model and the case's own bytes (a 50 MB case holds 50 MB
before the parser sees it). Not the kernel's ru_maxrss from os.wait4: Linux carries
a forked child's high-water mark across exec, so that would report at least this
bench process's own size (tests/test_hostile.py met it at 1,088 MB under pytest).
The baseline line is the same process with an empty message: what the worst cases
add to it is their own cost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]

# What each child runs: argv[1] is the case name ('' = the baseline, an empty message).
CHILD = r"""
import json, sys, time
from tests.hostile_cases import CASES
from textnb.spamfilter import SpamFilter
from textnb.mail.sources import RawMessage, iter_index, iter_messages
spam_filter = SpamFilter().fit(iter_index(sys.argv[2] + "/corpora/sample/index"))
case = next((c for c in CASES if c.name == sys.argv[1]), None)
raw = case.build() if case else b""
start = time.perf_counter()
if case is not None and case.kind == "mbox":
    with open(sys.argv[3], "wb") as stream:
        stream.write(raw)
    messages = list(iter_messages(sys.argv[3]))
else:
    messages = [RawMessage(sys.argv[1] or "baseline", raw, None)]
decisions = [m.decision for m in spam_filter.classify(messages)]
seconds = time.perf_counter() - start
with open("/proc/self/status") as status:
    peak_kb = int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
print(json.dumps({"seconds": seconds, "labels": [d.label for d in decisions],
                  "log_odds": [float(d.log_odds) for d in decisions], "bytes": len(raw),
                  "peak_rss_mb": peak_kb / 1024}))
"""


def run_case(name: str) -> dict:
    """One case in a fresh process: its timing and verdicts, and the process's peak RSS."""
    with tempfile.TemporaryDirectory() as tmp, open(tmp + "/stderr", "w+b") as stderr:
        # Run in the project folder: `python -c` puts it first on the path (tests.hostile_cases).
        proc = subprocess.run([sys.executable, "-c", CHILD, name, str(PROJECT), tmp + "/mbox"],
                              stdout=subprocess.PIPE, stderr=stderr, cwd=PROJECT)
        stderr.seek(0)
        err = stderr.read()
    if proc.returncode != 0:
        return {"case": name, "error": err.decode(errors="replace")[-500:]}
    return {"case": name or "baseline", **json.loads(proc.stdout)}


def main(argv: list[str] | None = None) -> dict:
    from tests.hostile_cases import CASES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--out", default=str(PROJECT / "bench" / "results" / "hostile.json"))
    args = parser.parse_args(argv)
    names = args.cases or [case.name for case in CASES]
    unknown = sorted(set(names) - {case.name for case in CASES})
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; see tests/hostile_cases.py")
    rows = []
    print(f"{'case':42s} {'seconds':>8s} {'peak MB':>8s}  verdict")
    for name in ["", *names]:
        row = run_case(name)
        rows.append(row)
        if "error" in row:
            print(f"{row['case']:42s} ERROR {row['error']}")
            continue
        verdict = ",".join(row["labels"])
        print(f"{row['case']:42s} {row['seconds']:8.2f} {row['peak_rss_mb']:8.0f}  {verdict}",
              flush=True)
    ok = [row for row in rows[1:] if "error" not in row]
    worst_time = max(ok, key=lambda row: row["seconds"])
    worst_rss = max(ok, key=lambda row: row["peak_rss_mb"])
    summary = {
        "cases": len(rows) - 1, "classified": len(ok),
        "baseline_peak_rss_mb": rows[0].get("peak_rss_mb"),
        "worst_seconds": {"case": worst_time["case"], "seconds": worst_time["seconds"]},
        "worst_peak_rss_mb": {"case": worst_rss["case"], "peak_rss_mb": worst_rss["peak_rss_mb"]},
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(f"\n{summary['classified']} of {summary['cases']} cases classified; worst time "
          f"{worst_time['seconds']:.2f} s ({worst_time['case']}); peak RSS "
          f"{worst_rss['peak_rss_mb']:.0f} MB ({worst_rss['case']}), baseline "
          f"{summary['baseline_peak_rss_mb']:.0f} MB")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()
