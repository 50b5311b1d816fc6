"""The review page under load: many sessions browsing and searching a large verdict log.

    python -m bench.review_load [--verdicts 100000] [--sessions 50] [--seconds 60] [--think 0]
        [--json OUT]

A verdict log of ``--verdicts`` rows spread over 10 users and 30 days (a tenth of them
with a 2 KB message kept for review) is written directly; ``textnb web`` serves it in a
process of its own (as deployed: uvicorn, one worker) on loopback. ``--sessions``
threads of this process each log in as one of the users and, for ``--seconds``, load
in turn: the history, a search of the history by a word of the subjects, the next
page, the review queue and a message's page, one request after the other (or, with
``--think S``, a random pause of mean S seconds between pages, as a person reads). Reported:
requests, median, 90th and 95th percentile latency per page kind and over all, and the
error count. No scorer runs: teaching is not part of the load (statistics ping the
scorer and are left out).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.stats import percentile

USERS = [f"user{i}" for i in range(10)]
PASSWORD = "load-test-password"


def fill(db: Path, n: int) -> None:
    from textnb.review.store import VerdictStore

    store = VerdictStore(db, max_bytes=2**31)
    rng = random.Random(38)
    now = time.time()
    words = ["invoice", "meeting", "offer", "viagra", "report", "lottery", "project", "sale"]
    rows = []
    for i in range(n):
        label = rng.choice(["spam", "ham", "ham", "unsure"])
        keep = rng.random() < 0.1
        subject = f"{rng.choice(words)} {rng.choice(words)} {i}"
        raw = (f"From: s{i}@example.com\nSubject: {subject}\n\n".encode()
               + b"words of the message " * 100) if keep else None
        rows.append({"at": now - (n - i) * 30 * 86400 / n, "user": USERS[i % len(USERS)],
                     "model": "user", "source": "serve", "sender": f"s{i}@example.com",
                     "subject": subject, "label": label, "log_odds": rng.uniform(-15, 15),
                     "p_spam": 0.5, "threshold": 0.0, "action": "scored",
                     "digest": "0" * 64 if keep else "", "size": 2000,
                     "clues": [["subject:offer", 2.5], ["viagra", 4.1]] if keep else None,
                     "raw": raw})
        if len(rows) == 5000:
            store.add_many(rows)
            rows = []
    if rows:
        store.add_many(rows)
    store.close()


class Session:
    def __init__(self, port: int, user: str):
        self.port, self.user, self.cookie = port, user, ""

    def request(self, method: str, path: str, body: str = "", cookie: str = ""):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Cookie": cookie or self.cookie}
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        data = reply.read().decode("utf-8", "replace")
        conn.close()
        return reply, data

    def log_in(self) -> None:
        reply, page = self.request("GET", "/login")
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        login_cookie = reply.getheader("set-cookie").split(";")[0]
        reply, _ = self.request("POST", "/login",
                                f"csrf={token}&name={self.user}&password={PASSWORD}",
                                cookie=login_cookie)
        assert reply.status == 303, reply.status
        self.cookie = reply.getheader("set-cookie").split(";")[0]


def browse(session: Session, until: float, times: dict, errors: list, think: float) -> None:
    rng = random.Random(session.user)
    words = ["invoice", "meeting", "offer", "report", "lottery"]
    while time.monotonic() < until:
        for kind in ("history", "search", "older", "review", "message"):
            if kind == "history":
                path = "/history"
            elif kind == "search":
                path = f"/history?q={rng.choice(words)}"
            elif kind == "older":
                path = f"/history?before={rng.randrange(1000, 100000)}"
            elif kind == "review":
                path = "/review"
            else:
                path = session.last_message if hasattr(session, "last_message") else "/review"
            started = time.perf_counter()
            try:
                reply, page = session.request("GET", path)
                ok = reply.status == 200
            except OSError as exc:
                ok, page = False, str(exc)
            times.setdefault(kind, []).append(time.perf_counter() - started)
            if not ok:
                errors.append((kind, path))
            found = re.findall(r'href="(/message/\d+)"', page)
            if found:
                session.last_message = rng.choice(found)
            if think:
                time.sleep(rng.uniform(0, 2 * think))


def run(n: int, sessions: int, seconds: float, think: float = 0.0) -> dict:
    from textnb.review.accounts import Accounts

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        db, users = tmp / "verdicts.db", tmp / "users.json"
        started = time.perf_counter()
        fill(db, n)
        filled = time.perf_counter() - started
        accounts = Accounts(users)
        for user in USERS:
            accounts.add(user, PASSWORD)
        with __import__("socket").socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "textnb", "web", "--record", str(db),
                                   "--users", str(users), "--port", str(port)],
                                  stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    Session(port, "x").request("GET", "/login")
                    break
                except OSError:
                    time.sleep(0.2)
            clients = [Session(port, USERS[i % len(USERS)]) for i in range(sessions)]
            for client in clients:
                client.log_in()
            times: dict[str, list[float]] = {}
            errors: list = []
            until = time.monotonic() + seconds
            threads = [threading.Thread(target=browse, args=(c, until, times, errors, think))
                       for c in clients]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
    every = [t for values in times.values() for t in values]
    out = {"verdicts": n, "sessions": sessions, "seconds": seconds, "think": think,
           "fill_seconds": round(filled, 1), "errors": len(errors)}
    for kind, values in [*sorted(times.items()), ("all", every)]:
        out[kind] = {"requests": len(values),
                     "median_ms": round(statistics.median(values) * 1000, 1),
                     "p90_ms": round(percentile(values, 0.9) * 1000, 1),
                     "p95_ms": round(percentile(values, 0.95) * 1000, 1)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verdicts", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--think", type=float, default=0.0,
                        help="mean seconds a session waits between pages (0: none, the worst case)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.verdicts, args.sessions, args.seconds, args.think)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
