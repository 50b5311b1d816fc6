"""The review page under load while the scorer answers mail: many sessions browsing and
searching a large verdict log.

    python -m bench.review_load [--verdicts 100000] [--sessions 50] [--seconds 60]
        [--think 0 1] [--rate 10] [--limit] [--control] [--big-message] [--json OUT]

A verdict log of ``--verdicts`` rows spread over 10 users and 30 days (a tenth of them
with a 2 KB message kept for review) is written directly. Then, each in a process of
its own, as deployed on one host:

- two scorers (``textnb serve``) on the same model (trained on the SpamAssassin train
  split, or the sample corpus when the public corpora are absent): **on** records its
  verdicts (``--record``) into the log the page reads, **off** records nothing;
- ``textnb web`` on that log (uvicorn, one worker), on loopback;
- the mail: a client process that, ``--rate`` times a second, sends one message of the
  test split to each scorer, in alternating order, and times each answer, so the
  machine's load hits both alike; their ratio is what recording costs the mail path;
- the readers: ``--sessions`` sessions (asyncio, one keep-alive connection each, as a
  browser keeps one) in one process, each logged in as one of the users, loading in
  turn the history, a search of it (a word of many subjects, or a sender's address
  that matches one row), the next page, the review queue and a message's page, each
  after a random pause of mean ``--think`` seconds (0: none, the worst case).

All run for ``--seconds``, once per ``--think``. Reported per run: requests, median,
90th and 95th percentile latency per page kind and over all, page errors, and the
scorers' median, 90th and 95th percentile per-message latency with their ratios (on /
off); the load average before it. ``--control`` records on neither scorer: the ratio an
A/A run gives, the noise the real ratio is read against. ``--limit`` adds the machine's own limit: the same
readers (no pause) against a Starlette endpoint that only returns a page of the
history's size, under uvicorn the same way, with the scorers and the mail running.
``--big-message`` keeps one HTML message of 10,000,001 bytes (the most the client sends)
in the log and adds one more session that reloads its page without pause; its pages are
reported apart (``big``), the others' as before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import percentile

USERS = [f"user{i}" for i in range(10)]
PASSWORD = "load-test-password"
WORDS = ["invoice", "meeting", "offer", "viagra", "report", "lottery", "project", "sale"]
KINDS = ("history", "search", "older", "review", "message")


BIG_BYTES = 10_000_001


def fill(db: Path, n: int, big: bool = False) -> int | None:
    """Write the log; RETURNS the id of the large kept message (``big``), else None."""
    from textnb.review.store import VerdictStore

    store = VerdictStore(db, max_bytes=2**31)
    rng = random.Random(38)
    now = time.time()
    rows = []
    for i in range(n):
        label = rng.choice(["spam", "ham", "ham", "unsure"])
        keep = rng.random() < 0.1
        subject = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}"
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
    big_id = None
    if big:
        # HTML, as large mail mostly is: its visible text takes the parser about 1.1 s
        # for 10 MB on this machine, against 40 ms for as much plain text
        line = b"<p>a long message kept for <b>review</b>, shown on its page</p>\n"
        raw = (b"From: big@example.com\nSubject: a large one\nContent-Type: text/html\n\n"
               + line * (BIG_BYTES // len(line)))
        raw = raw[:BIG_BYTES].ljust(BIG_BYTES, b"x")
        (big_id,) = store.add_many([{
            "at": now, "user": USERS[0], "model": "user", "source": "serve",
            "sender": "big@example.com", "subject": "a large one", "label": "unsure",
            "log_odds": 0.5, "p_spam": 0.6, "threshold": 0.0, "action": "scored",
            "digest": "1" * 64, "size": BIG_BYTES, "clues": None, "raw": raw}])
    store.close()
    return big_id


def train(model: Path, folder: Path, n: int = 600) -> str:
    """Fit the scorers' model; write ``n`` test messages to ``folder``. RETURNS the corpus."""
    from textnb.mail.corpora import corpora_root, iter_corpus, split
    from textnb.mail.sources import RawMessage, iter_index
    from textnb.modelfile import store
    from textnb.spamfilter import SpamFilter

    if corpora_root() is not None:
        corpus = "spamassassin"
        train_set, test = split(iter_corpus(corpus))
        train_set = [RawMessage(e.relpath, e.raw, e.label) for e in train_set]
        test = [e.raw for e in sorted(test, key=lambda e: e.relpath)]
    else:
        corpus = "sample"
        train_set = list(iter_index(Path(__file__).resolve().parents[1] / "corpora/sample/index"))
        test = [m.raw for m in train_set]
    store.save(SpamFilter().fit(train_set), model)
    folder.mkdir()
    step = max(1, len(test) // n)
    for i, raw in enumerate(test[::step][:n]):
        (folder / f"{i:05d}").write_bytes(raw)
    return corpus


# -- the readers: sessions of one process, one keep-alive connection each ---------------
class _Connection:
    def __init__(self, port: int):
        self.port, self.reader, self.writer = port, None, None

    async def request(self, method: str, path: str, body: str = "", cookie: str = ""):
        """(status, headers, body) of one request; reconnects when the server closed."""
        for attempt in (0, 1):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            if cookie:
                head += f"Cookie: {cookie}\r\n"
            if body:
                head += ("Content-Type: application/x-www-form-urlencoded\r\n"
                         f"Content-Length: {len(body)}\r\n")
            try:
                self.writer.write((head + "\r\n" + body).encode())
                status_line, *lines = (await self.reader.readuntil(b"\r\n\r\n")).decode(
                    "latin-1").split("\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                self.writer = None
                if attempt:
                    raise
                continue
            headers = {}
            for line in lines:
                name, _, value = line.partition(":")
                if name:
                    headers.setdefault(name.lower(), []).append(value.strip())
            data = await self.reader.readexactly(int(headers.get("content-length", ["0"])[0]))
            if headers.get("connection") == ["close"]:
                self.writer.close()
                self.writer = None
            return int(status_line.split()[1]), headers, data.decode("utf-8", "replace")


async def _log_in(conn: _Connection, user: str) -> str:
    _, headers, page = await conn.request("GET", "/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    login_cookie = headers["set-cookie"][0].split(";")[0]
    status, headers, _ = await conn.request("POST", "/login",
                                            f"csrf={token}&name={user}&password={PASSWORD}",
                                            cookie=login_cookie)
    assert status == 303, status
    return next(c.split(";")[0] for c in headers["set-cookie"] if c.startswith("textnb_session"))


async def _browse(conn, cookie, user, start, until, think, times, errors, n_verdicts):
    rng = random.Random(user + str(id(conn)))
    last_message = "/review"
    await asyncio.sleep(max(0.0, start - time.time()))
    while time.time() < until:
        for kind in KINDS:
            path = {"history": "/history",
                    "search": (f"/history?q={rng.choice(WORDS)}" if rng.random() < 0.5
                               else f"/history?q=s{rng.randrange(n_verdicts)}%40"),
                    "older": f"/history?before={rng.randrange(1000, n_verdicts)}",
                    "review": "/review", "message": last_message}[kind]
            started = time.perf_counter()
            try:
                status, _, page = await conn.request("GET", path, cookie=cookie)
            except OSError as exc:
                status, page = 0, str(exc)
            times[kind].append(time.perf_counter() - started)
            if status != 200:
                errors.append(f"{kind} {path}: {status}")
            found = re.findall(r'href="(/message/\d+)"', page)
            if found:
                last_message = rng.choice(found)
            if think:
                await asyncio.sleep(rng.uniform(0, 2 * think))
            if time.time() >= until:
                break


async def _reload(conn, cookie, path, start, until, times, errors):
    """One session loading ``path`` again and again, without pause."""
    await asyncio.sleep(max(0.0, start - time.time()))
    while time.time() < until:
        started = time.perf_counter()
        status, _, _ = await conn.request("GET", path, cookie=cookie)
        times.append(time.perf_counter() - started)
        if status != 200:
            errors.append(f"big {path}: {status}")


def readers(port: int, sessions: int, start: float, seconds: float, think: float,
            n_verdicts: int, log_in: bool = True, big_id: int | None = None) -> dict:
    """The readers' process: log in, wait for ``start``, browse; the latencies. With
    ``big_id``, one more session reloads that message's page."""
    async def main():
        conns = [_Connection(port) for _ in range(sessions)]
        users = [USERS[i % len(USERS)] for i in range(sessions)]
        cookies = [await _log_in(c, u) if log_in else "" for c, u in zip(conns, users)]
        times = {kind: [] for kind in KINDS}
        errors: list = []
        work = [_browse(c, k, u, start, start + seconds, think, times, errors, n_verdicts)
                for c, k, u in zip(conns, cookies, users)]
        if big_id is not None:
            times["big"] = []
            conn = _Connection(port)
            work.append(_reload(conn, await _log_in(conn, USERS[0]), f"/message/{big_id}",
                                start, start + seconds, times["big"], errors))
        await asyncio.gather(*work)
        return {"times": times, "errors": errors, "late": max(0.0, time.time() - start - seconds)}

    return asyncio.run(main())


# -- the mail ------------------------------------------------------------------------
def mail(addresses: dict, folder: str, start: float, seconds: float, rate: float) -> dict:
    """The mail client's process: ``rate`` messages a second to each scorer, in turn."""
    from textnb.delivery.client import score_remote

    raws = [p.read_bytes() for p in sorted(Path(folder).iterdir())]
    servers = list(addresses.items())
    times = {name: [] for name in addresses}
    time.sleep(max(0.0, start - time.time()))
    i, next_at = 0, time.monotonic()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        raw = raws[i % len(raws)]
        for name, address in (servers if i % 2 == 0 else servers[::-1]):
            started = time.perf_counter()
            score_remote(address, raw)
            times[name].append(time.perf_counter() - started)
        i += 1
        next_at += 1 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))
    return times


# -- the servers ---------------------------------------------------------------------
_TRIVIAL = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route
page = "x" * int(sys.argv[2])
async def endpoint(request):
    return HTMLResponse(page)
app = Starlette(routes=[Route("/{path:path}", endpoint)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until(ready, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not listening yet (OSError, ScorerUnavailable)
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start within {seconds:.0f} s")


def _http_up(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def _summary(values: list[float]) -> dict:
    return {"requests": len(values),
            "median_ms": round(statistics.median(values) * 1000, 2) if values else None,
            "p90_ms": round(percentile(values, 0.9) * 1000, 2) if values else None,
            "p95_ms": round(percentile(values, 0.95) * 1000, 2) if values else None}


def run_one(tmp: Path, db: Path, users: Path, model: Path, messages: Path, n: int,
            sessions: int, seconds: float, think: float, rate: float,
            trivial: bool = False, control: bool = False, big_id: int | None = None) -> dict:
    """One timed run: scorers, the page (or the trivial endpoint), mail and readers."""
    from textnb.delivery.client import ping

    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    addresses = {"on": str(run_dir / "on.sock"), "off": str(run_dir / "off.sock")}
    port = _free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    processes = [subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model", str(model),
                                   "--socket", addresses[name], "--reload-interval", "0"]
                                  + (["--record", str(db)] if name == "on" and not control
                                     else []), **quiet)
                 for name in ("on", "off")]
    try:
        for address in addresses.values():
            _wait_until(lambda: ping(address, timeout=1.0), f"the scorer at {address}")
        page_server = ([sys.executable, "-c", _TRIVIAL, str(port), "17600"] if trivial else
                       [sys.executable, "-m", "textnb", "web", "--record", str(db), "--users",
                        str(users), "--port", str(port), "--scorer", addresses["on"]])
        processes.append(subprocess.Popen(page_server, **quiet))
        _wait_until(lambda: _http_up(port), "the page")
        load = os.getloadavg()[0]
        start = time.time() + 3 + sessions * 0.1  # the readers log in meanwhile
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            browsing = pool.apply_async(readers, (port, sessions, start, seconds, think, n,
                                                  not trivial, None if trivial else big_id))
            scoring = pool.apply_async(mail, (addresses, str(messages), start, seconds, rate))
            pages, scored = browsing.get(), scoring.get()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
    out = {"think": think, "sessions": sessions, "seconds": seconds, "page": (
        "a trivial Starlette endpoint (17,600 bytes)" if trivial else "textnb web"),
        "load_before": round(load, 2), "page_errors": len(pages["errors"]),
        "readers_late_s": round(pages["late"], 2)}
    if pages["errors"]:
        out["first_errors"] = pages["errors"][:3]
    big = pages["times"].pop("big", None)
    every = [t for values in pages["times"].values() for t in values]
    out["pages"] = {kind: _summary(values) for kind, values in
                    [*(([] if trivial else pages["times"].items())), ("all", every)]}
    if big is not None:
        out["pages"]["big"] = _summary(big)
    out["pages_per_second"] = round(len(every) / seconds, 1)
    out["scorer"] = {name: _summary(values) for name, values in scored.items()}
    for stat in ("median_ms", "p90_ms", "p95_ms"):
        out["scorer"][f"ratio_{stat[:-3]}"] = round(
            out["scorer"]["on"][stat] / out["scorer"]["off"][stat], 3)
    return out


def run(n: int, sessions: int, seconds: float, thinks: list[float], rate: float,
        limit: bool, control: bool = False, big: bool = False) -> dict:
    from textnb.review.accounts import Accounts
    from textnb.review.store import VerdictStore

    out: dict = {"verdicts": n, "mail_per_second_per_scorer": rate, "cores": os.cpu_count(),
                 "control": control, "big_message": big}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        db, users, model, messages = (tmp / "verdicts.db", tmp / "users.json",
                                      tmp / "model.tnb", tmp / "messages")
        started = time.perf_counter()
        big_id = fill(db, n, big)
        out["fill_seconds"] = round(time.perf_counter() - started, 1)
        out["corpus"] = train(model, messages)
        accounts = Accounts(users)
        for user in USERS:
            accounts.add(user, PASSWORD)
        for think in thinks:
            out[f"think_{think:g}s"] = run_one(tmp, db, users, model, messages, n, sessions,
                                               seconds, think, rate, control=control,
                                               big_id=big_id)
        if limit:
            out["limit"] = run_one(tmp, db, users, model, messages, n, sessions, seconds,
                                   0.0, rate, trivial=True, control=control)
        store = VerdictStore(db, max_bytes=2**31)
        out["recorded_by_the_scorer"] = dict(zip(("verdicts", "kept", "with_clues"), store.db.execute(
            "SELECT count(*), sum(has_raw), sum(clues IS NOT NULL) FROM verdicts WHERE id > ?",
            (n,)).fetchone()))
        out["dropped"] = {why: count for why, count, _ in store.dropped()}
        store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verdicts", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--think", type=float, nargs="+", default=[0.0, 1.0],
                        help="mean seconds a session waits between pages, one run each "
                             "(0: none, the worst case)")
    parser.add_argument("--rate", type=float, default=10.0,
                        help="messages a second the mail client sends each scorer")
    parser.add_argument("--limit", action="store_true",
                        help="also time a trivial endpoint under the same readers and mail")
    parser.add_argument("--control", action="store_true",
                        help="A/A: neither scorer records (what the ratio is by chance)")
    parser.add_argument("--big-message", action="store_true",
                        help="one more session reloads the page of a kept 10 MB message")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.verdicts, args.sessions, args.seconds, args.think, args.rate, args.limit,
                 args.control, args.big_message)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
