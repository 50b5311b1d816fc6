"""Memory per resident user of ``textnb serve --models``, and the bound on it.

    python -m bench.resident_users --model MODEL [--users 16] [--cap 4] [--json OUT]

A user's first learn makes their model a copy of the shared one (textnb.delivery.users), so
each resident user costs about the shared model's arrays and vocabulary again. In a
temporary folder whose ``_shared/model.tnb`` is MODEL, one ModelSet learns one message
for each of ``--users`` new users with every model kept loaded, and reports the
process's resident set size (VmRSS) after each; then a second ModelSet, with
``--cap`` users resident at most (``--max-resident-users``), learns for the same
number of users, and reports its RSS, the time a dropped user's model takes to load
again, and whether that model scores as before it was dropped.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from textnb.delivery.users import ModelSet
from textnb.delivery.verdict_headers import score_with

MESSAGE = b"Subject: resident user %d\nFrom: a@example.org\n\nlearned once by user %d\n"


def rss_mb() -> float:
    """This process's resident set size, from /proc (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise OSError("no VmRSS in /proc/self/status")


def learn_for(models: ModelSet, users: int, first: int = 0) -> list[float]:
    sizes = []
    for i in range(first, first + users):
        models.for_learning(f"user{i}").update("LEARN", MESSAGE % (i, i), "spam")
        sizes.append(round(rss_mb(), 1))
    return sizes


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the shared model")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--cap", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "models"
        (folder / "_shared").mkdir(parents=True)
        shutil.copyfile(args.model, folder / "_shared" / "model.tnb")
        unbounded = ModelSet(folder, flush_seconds=3600, max_resident=args.users + 1)
        base = rss_mb()
        sizes = learn_for(unbounded, args.users)
        per_user = (sizes[-1] - base) / args.users
        del unbounded
        bounded = ModelSet(folder, flush_seconds=3600, max_resident=args.cap)
        base_bounded = rss_mb()
        capped = learn_for(bounded, args.users, first=args.users)
        # user{users} was the first of the second round: dropped long since.
        dropped = f"user{args.users}"
        probe = MESSAGE % (args.users, args.users)
        start = time.perf_counter()
        reloaded = bounded.user_model(dropped)
        reload_seconds = time.perf_counter() - start
        again = score_with(reloaded.spam_filter, probe).log_odds
    result = {"model": str(args.model), "model_bytes": args.model.stat().st_size,
              "users": args.users, "rss_before_mb": round(base, 1), "rss_mb": sizes,
              "mb_per_resident_user": round(per_user, 1), "cap": args.cap,
              "rss_before_capped_mb": round(base_bounded, 1), "rss_capped_mb": capped,
              "reload_seconds": round(reload_seconds, 3), "reloaded_log_odds": again}
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
