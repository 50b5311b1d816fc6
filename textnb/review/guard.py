"""Who is asking and what reaches them: the review page's sessions, its login throttle,
and the ASGI middleware every request and response passes (security headers, the
request body limit). textnb.review.web builds the app on these.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.responses import Response

__all__ = ["FAILURE_WINDOW", "HASHES_AT_ONCE", "HEADERS", "LOGINS_WAITING", "MAX_FAILURES",
           "MAX_FORM_BYTES", "SESSION_SECONDS", "Cache", "LoginForms", "SecurityHeaders",
           "Sessions", "Throttle", "same_origin"]

# A session lasts this long from login (a work day), and this many exist at once at
# most (the oldest goes first): each is a few hundred bytes.
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 10_000
# Failed logins allowed per name and per client address in the window. On top of
# argon2's own slow check, five tries per five minutes makes guessing a password of a
# million candidates take ten years (docs/design/review-page.md#logins).
MAX_FAILURES = 5
FAILURE_WINDOW = 300.0
# Password checks run at once at most: each argon2 check takes 64 MiB (argon2-cffi's
# default memory cost), so thirty logins at once would take 2 GB. More wait their turn,
# and past LOGINS_WAITING a login is refused (503) rather than queued.
HASHES_AT_ONCE = 2
LOGINS_WAITING = 32
# The largest request body (the forms are a few hundred bytes; a bulk selection of 50
# ids a few KB); anything larger is refused before it is read.
MAX_FORM_BYTES = 64 * 1024
HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; img-src 'self'; "
                                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # no referrer to other sites; to this one, so that the browser names the page's own
    # origin on its POSTs (no-referrer makes it send "Origin: null", which same_origin
    # refuses: another site can send that too)
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

class SecurityHeaders:
    """ASGI middleware: HEADERS on every response, whatever made it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > MAX_FORM_BYTES:
            response = Response("a form this large is not one of this page's", status_code=413)
            return await response(scope, receive, send)
        received = 0

        async def receive_at_most():  # a chunked body declares no length: count it
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > MAX_FORM_BYTES:
                raise HTTPException(413, "a form this large is not one of this page's")
            return message

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive_at_most, send_with_headers)


class Sessions:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._by_token: dict[str, dict] = {}

    def new(self, user: dict) -> tuple[str, dict]:
        token = secrets.token_urlsafe(32)
        session = {**user, "csrf": secrets.token_urlsafe(32),
                   "expires": self._clock() + SESSION_SECONDS}
        with self._lock:
            while len(self._by_token) >= MAX_SESSIONS:
                self._by_token.pop(next(iter(self._by_token)))
            self._by_token[token] = session
        return token, session

    def get(self, token: str | None) -> dict | None:
        if not token:
            return None
        with self._lock:
            session = self._by_token.get(token)
            if session is not None and session["expires"] < self._clock():
                del self._by_token[token]
                return None
            return session

    def end(self, token: str | None) -> None:
        with self._lock:
            self._by_token.pop(token or "", None)


class LoginForms:
    """The login form's own CSRF tokens: issued by this server with each form, each
    good for ``seconds``; a token must also come back in the form's cookie. With the
    Origin check (:func:`same_origin`) a page of another origin on the same host, which
    can set cookies for it, cannot log a browser into another account."""

    def __init__(self, seconds: float = 600.0, most: int = 10_000, clock=time.monotonic):
        self.seconds, self.most, self._clock = seconds, most, clock
        self._lock = threading.Lock()
        self._issued: dict[str, float] = {}

    def issue(self) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._issued) >= self.most:
                self._issued.pop(next(iter(self._issued)))
            self._issued[token] = self._clock() + self.seconds
        return token

    def take(self, token: str) -> bool:
        """Whether ``token`` was issued here and is still good; it is used up."""
        with self._lock:
            expires = self._issued.pop(token, None)
        return expires is not None and expires >= self._clock()


def same_origin(headers) -> bool:
    """Whether a POST comes from this site's own pages, by the headers browsers add to
    it: ``Sec-Fetch-Site`` (same-origin, or none: typed by the user) and ``Origin``
    (this Host). Cookies do not tell ports apart, so SameSite alone lets another
    service on 127.0.0.1 post here; a client that sends neither header is no browser
    and carries no victim's cookies."""
    from urllib.parse import urlsplit

    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc != headers.get("host")):
        return False
    return True


class Throttle:
    """Failed logins per key (a name, an address) within FAILURE_WINDOW.

    A try is counted as failed when it starts (:meth:`attempt`), before its password is
    checked, and forgiven when it succeeds: logins sent at once are throttled as surely
    as logins sent one after another, and the sixth of thirty parallel guesses is
    refused without being hashed.
    """

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, deque] = {}

    def _wait(self, now: float, keys) -> float:
        longest = 0.0
        for key in keys:
            times = self._failures.get(key)
            while times and times[0] < now - FAILURE_WINDOW:
                times.popleft()
            if times is not None and not times:
                del self._failures[key]
            elif times is not None and len(times) >= MAX_FAILURES:
                longest = max(longest, times[0] + FAILURE_WINDOW - now)
        return longest

    def wait(self, *keys: str) -> float:
        """Seconds until a login may be tried for these keys (0: now)."""
        with self._lock:
            return self._wait(self._clock(), keys)

    def attempt(self, *keys: str) -> float:
        """Start a try for these keys: 0, and the try counted as failed until
        :meth:`forgive`; or the seconds to wait, and nothing counted."""
        now = self._clock()
        with self._lock:
            wait = self._wait(now, keys)
            if wait:
                return wait
            if len(self._failures) > 100_000:  # a flood of made-up names: start afresh
                self._failures.clear()
            for key in keys:
                self._failures.setdefault(key, deque()).append(now)
            return 0.0

    def failed(self, *keys: str) -> None:
        with self._lock:
            if len(self._failures) > 100_000:
                self._failures.clear()
            for key in keys:
                self._failures.setdefault(key, deque()).append(self._clock())

    def forgive(self, *keys: str) -> None:
        """A try that succeeded: its count taken back (the latest of each key)."""
        with self._lock:
            for key in keys:
                times = self._failures.get(key)
                if times:
                    times.pop()

    def clear(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)


class Cache:
    """Values computed at most once per ``seconds`` per key (a bounded number of keys)."""

    def __init__(self, seconds: float, keys: int = 1000, clock=time.monotonic):
        self.seconds, self.keys, self._clock = seconds, keys, clock
        self._lock = threading.Lock()
        self._values: dict = {}

    def get(self, key, compute):
        now = self._clock()
        with self._lock:
            found = self._values.get(key)
        if found is not None and found[0] > now:
            return found[1]
        value = compute()
        with self._lock:
            if len(self._values) >= self.keys:
                self._values.clear()
            self._values[key] = (now + self.seconds, value)
        return value
