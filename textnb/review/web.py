"""``textnb web``: the review page (history, review queue, statistics) as a Starlette app.

What each request may do, in one place (docs/review-page.md#security has the why; the
sessions, the login throttle, the headers and the body limit are
:mod:`textnb.review.guard`'s):

- **Who.** Every page but /login needs a session: a random token in a cookie
  (HttpOnly, SameSite=Strict, Secure with ``secure_cookies``) naming a server-side
  session, which ends after ``SESSION_SECONDS``, at logout (and at a restart), or at
  its next request once its user's entry in the users file is changed or removed.
  Passwords are checked against the argon2 hashes of :mod:`textnb.review.accounts`
  (or, for a name not there, by the IMAP server's LOGIN with ``imap``), at most
  ``HASHES_AT_ONCE`` at a time; a try counts as failed from its start, and after
  ``MAX_FAILURES`` in ``FAILURE_WINDOW`` seconds for one name or from one address
  (the connection's, or what ``textnb web --trusted-proxy`` names says), further tries
  are refused (429) before any hashing until the window passes.
- **Whose.** A user sees only the verdicts recorded for their name; a message id that
  is not theirs is answered exactly as one that does not exist (404). An admin sees
  every user's.
- **Changes.** Every POST comes from this site's own pages (``guard.same_origin``) and
  carries the session's CSRF token (the login form a token of its own, issued here
  and double-submitted in a cookie); without it: 403. Teaching goes through the scorer
  and is recorded in the same transaction of the log (:mod:`textnb.review.teach`); a
  verdict of the shared model asks to be confirmed. Held mail is released the same way,
  through the privileged command the operator names, never as root here
  (:mod:`textnb.review.release`), one message or a selection of at most
  ``MAX_RELEASE_ROWS``, each checked and released on its own; what each click does is
  :mod:`textnb.review.clicks`.
- **Ids.** An id is ASCII digits up to 2**63-1 (:func:`verdict_id`); anything else is
  an id that does not exist.
- **Size.** No request body is read past ``MAX_FORM_BYTES``: a declared length over
  it is refused before reading (413), and a chunked body (no length) when it gets there.
- **Mail is inert.** A message is shown as text only (textnb.mail.parse's decoded parts; HTML
  as its visible text), escaped by Jinja2's autoescape; no link, image or style of the
  message reaches the browser. Every response has a Content-Security-Policy that
  allows only this site's stylesheet and forms, no script at all, and no frames.

What a page costs: its reads of the verdict log and its rendering run in the event
loop, on one connection (:mod:`textnb.review.logfile`, which follows a log moved
aside or deleted): every read is a bounded index range (textnb.review.store),
the tables are :mod:`textnb.review.table`, and a reader in WAL mode never waits for
the writer, so a page is a millisecond or two of CPU with nothing to wait for
(docs/review-page.md#pages-under-load), and a hop to a worker thread and back (two
wake-ups, and the GIL taken back from whatever runs) would cost more than it spares.
What may wait runs on worker threads: argon2 (only for a login), teaching (the
scorer's socket, then a write), a kept message's text (parsed once, one at a time,
kept for its next view), the statistics (drawn at most once a minute per user) and
the scorer's ping.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from datetime import timezone
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .accounts import AccountError, Accounts, ImapLogin
from .clicks import (ACTIONS, MAX_RELEASE_ROWS, RELEASE_ACTIONS, Clicks, needs_confirming,
                     release_selection, summary)
from .guard import (HASHES_AT_ONCE, LOGINS_WAITING, SESSION_SECONDS, Cache, LoginForms,
                    SecurityHeaders, Sessions, Throttle, same_origin)
from .figures import statistics
from .logfile import LogConnections
from .query import days_between, queue_cursor, queue_filters, same_view, verdict_id
from .release import HELD, command_runner
from .shown_text import MAX_BODY_CHARS, ShownTexts, inert_text
from .store import SEARCH_ROWS, StoreError
from .table import verdict_table, when, zone_label

__all__ = ["make_app", "needs_confirming"]

PAGE_ROWS = 50
# A page's read waits at most this long for a lock: only another program can hold one
# against a WAL reader; the page then says the log is locked rather than hold up
# every other request (they share the event loop) for the writers' BUSY_MS.
READ_WAIT_MS = 100
# The statistics page's figures and charts are computed at most this often per user
# (counting a user's 30 days of verdicts reads all of them).
STATS_SECONDS = 60.0
# The longest message the client sends the scorer (textnb.delivery.client's
# MAX_MESSAGE_BYTES): a verdict of that size was given on the message's head only.
CUT_AT = 10_000_001
# What the page calls each reason the recorder dropped verdicts for.
DROP_REASONS = {"queue_full": "the recorder's queue was full", "locked": "the log was locked",
                "full": "the disk was full", "damaged": "the log was damaged",
                "error": "the log could not be written"}
COOKIE = "textnb_session"
LOGIN_COOKIE = "textnb_login"
_HERE = Path(__file__).resolve().parent


def make_app(db_path, users_path, scorer_address, *, secure_cookies: bool = False,
             learn=None, ping=None, days: float = 30.0, max_mb: int = 200, imap=None,
             clock=time.time, zone=timezone.utc, release_command=None, state=None):
    """The review page's ASGI app.

    db_path (Path): the verdict log ``textnb serve --record`` writes.
    users_path (Path): the users file (``textnb web-user``).
    scorer_address (str | tuple): the scorer to teach through (its socket or TCP port).
    secure_cookies (bool): mark cookies Secure (behind a TLS reverse proxy).
    learn, ping, state: stand-ins for textnb.delivery.client.learn_remote / ping /
        learned_as (tests); a ``learn`` given without ``state`` is never reconciled.
    release_command (list[str] | None): the command that releases a held message, its
        queue id appended (``sudo -n /usr/local/bin/textnb-release``,
        textnb.review.release); None: held mail is shown, not released.
    imap (tuple[str, int] | None): an IMAP server that checks the logins the users file
        does not hold (their mail passwords; textnb.review.accounts.ImapLogin).
    clock: the time the statistics end at (tests).
    zone (tzinfo): the time zone the pages show times in, and whose hours and days the
        statistics count.
    """
    from ..delivery.client import learn_remote, learned_as, ping as ping_remote

    if learn is None:
        def learn(raw, label, user):
            return learn_remote(scorer_address, raw, label, user=user)

        if state is None:
            def state(raw, user):
                return learned_as(scorer_address, raw, user=user)
    if ping is None:
        def ping(user):
            return ping_remote(scorer_address, timeout=2.0, user=user)

    accounts = Accounts(users_path)
    release_run = command_runner(release_command) if release_command else None
    clicks = Clicks(learn, state, release_run)
    mail_logins = ImapLogin(imap) if imap is not None else None

    def verify(name: str, password: str) -> dict | None:
        user = accounts.verify(name, password)
        if user is not None:
            return {**user, "proof": accounts.proof(name)}
        if mail_logins is not None and name not in accounts.load():
            user = mail_logins.verify(name, password)
            return None if user is None else {**user, "proof": None}
        return None

    sessions, throttle, login_forms = Sessions(), Throttle(), LoginForms()
    hashing = {"semaphore": None, "waiting": 0}  # the semaphore belongs to the running loop
    # the templates are compiled once (they change only with the package)
    env = Environment(loader=FileSystemLoader(str(_HERE / "templates")), auto_reload=False,
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["when"] = lambda at: when(at, zone)
    env.filters["zone"] = lambda at: zone_label(zone, at)
    env.globals.update(reasons=DROP_REASONS, page_rows=PAGE_ROWS, search_rows=SEARCH_ROWS,
                       cut_at=CUT_AT, max_body_chars=MAX_BODY_CHARS,
                       can_release=release_run is not None, held=HELD,
                       max_release_rows=MAX_RELEASE_ROWS)
    figures_cache = Cache(STATS_SECONDS)
    css = (_HERE / "templates" / "style.css").read_text(encoding="utf-8")
    connections = LogConnections(db_path, days, max_mb * 2**20, {"read": READ_WAIT_MS})

    def raw_of(number: int) -> bytes | None:
        with connections.use("message") as store:
            return store.raw(number)

    shown_texts = ShownTexts(raw_of, inert_text)

    def page(request, name: str, session, status: int = 200, **context) -> HTMLResponse:
        body = env.get_template(name).render(session=session, path=request.url.path,
                                             **context)
        return HTMLResponse(body, status_code=status)

    def shown(request, name: str, session, store, **context) -> HTMLResponse:
        """A page of the log, with what the recorder dropped and the log's events."""
        dropped = store.dropped()
        return page(request, name, session, dropped=dropped,
                    dropped_total=sum(n for _, n, _ in dropped),
                    dropped_last=max((last for _, _, last in dropped), default=0.0),
                    events=store.events(),
                    notice=request.query_params.get("notice", "")[:300], **context)

    def current(request: Request) -> dict | None:
        """The request's session, while the login that opened it stands: a user removed
        from the users file, or given a new password or role, is signed out at once."""
        token = request.cookies.get(COOKIE)
        session = sessions.get(token)
        if session is None:
            return None
        try:
            proof = accounts.proof(session["name"])
        except AccountError:
            proof = "unreadable"
        if proof != session["proof"]:
            sessions.end(token)
            return None
        return session

    def scope_user(session, request) -> str | None:
        """Whose verdicts: the user's own; an admin's choice (None: everybody's)."""
        if not session["admin"]:
            return session["name"]
        return request.query_params.get("user") or None

    async def checked_form(request: Request, session: dict):
        form = await request.form()
        token = form.get("csrf", "")
        if not (isinstance(token, str) and hmac.compare_digest(token, session["csrf"])):
            return None
        return form

    def store_failed(request, session, exc) -> HTMLResponse:
        return page(request, "error.html", session, 503, message=str(exc))

    def to_login() -> RedirectResponse:
        return RedirectResponse("/login", status_code=303)

    def set_cookie(response, name, value, max_age):
        response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict",
                            secure=secure_cookies, path="/")

    # -- login ------------------------------------------------------------------------
    async def login_form(request: Request):
        token = login_forms.issue()
        response = page(request, "login.html", None, csrf=token,
                        error=request.query_params.get("error", "")[:100])
        set_cookie(response, LOGIN_COOKIE, token, 600)
        return response

    async def login(request: Request):
        if not same_origin(request.headers):
            return HTMLResponse("refused: this login form was sent from another site",
                                status_code=403)
        form = await request.form()
        token, cookie = form.get("csrf", ""), request.cookies.get(LOGIN_COOKIE, "")
        if not (cookie and isinstance(token, str) and hmac.compare_digest(token, cookie)
                and login_forms.take(token)):
            return HTMLResponse("refused: the form's CSRF token is missing or stale; reload "
                                "the login page", status_code=403)
        name, password = str(form.get("name", ""))[:64], str(form.get("password", ""))[:1024]
        client = request.client.host if request.client else "-"
        keys = ("name:" + name, "addr:" + client)
        wait = throttle.attempt(*keys)  # counted before the password is checked
        if wait:
            return HTMLResponse(f"too many failed logins; try again in {wait:.0f} s",
                                status_code=429)
        if hashing["semaphore"] is None:
            hashing["semaphore"] = asyncio.Semaphore(HASHES_AT_ONCE)
        if hashing["waiting"] >= LOGINS_WAITING:
            throttle.forgive(*keys)
            return HTMLResponse("too many logins at once; try again in a moment",
                                status_code=503)
        hashing["waiting"] += 1
        try:
            async with hashing["semaphore"]:
                user = await run_in_threadpool(verify, name, password)
        except AccountError as exc:  # the users file or the IMAP server: say which
            throttle.forgive(*keys)
            return page(request, "error.html", None, 503, message=str(exc))
        finally:
            hashing["waiting"] -= 1
        if user is None:
            return RedirectResponse("/login?error=wrong+name+or+password", status_code=303)
        throttle.forgive(keys[1])
        throttle.clear(keys[0])
        session_token, _ = sessions.new(user)
        response = RedirectResponse("/history", status_code=303)
        set_cookie(response, COOKIE, session_token, SESSION_SECONDS)
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response

    async def signed_post(request: Request):
        """(session, form, None) for a POST from a signed-in session that carries its CSRF
        token; (None, None, the response refusing it) otherwise."""
        session = current(request)
        if session is None:
            return None, None, to_login()
        if not same_origin(request.headers):
            return None, None, HTMLResponse("refused: sent from another site", status_code=403)
        form = await checked_form(request, session)
        if form is None:
            return None, None, HTMLResponse("refused: CSRF token missing", status_code=403)
        return session, form, None

    async def logout(request: Request):
        session, _, refused = await signed_post(request)
        if refused is not None:
            return refused
        sessions.end(request.cookies.get(COOKIE))
        response = to_login()
        response.delete_cookie(COOKIE, path="/")
        return response

    # -- pages -------------------------------------------------------------------------
    async def home(request: Request):
        return RedirectResponse("/history" if current(request) else "/login", status_code=303)

    def listing(request: Request, session: dict) -> HTMLResponse:
        search = request.query_params.get("q", "")[:200]
        before = verdict_id(request.query_params.get("before", ""))
        user = scope_user(session, request)
        with connections.use("read") as store:
            rows, next_before = store.page(user, search, before, PAGE_ROWS)
            return shown(request, "history.html", session, store,
                         rows=rows, table=verdict_table(rows, session["admin"], zone=zone),
                         search=search, next_before=next_before, user=user)

    def queue_page(request: Request, session: dict) -> HTMLResponse:
        params = request.query_params
        user = scope_user(session, request)
        filters = queue_filters(params)
        with connections.use("read") as store:
            rows, next_after = store.queue(
                user, queue_cursor(params.get("after", "")), PAGE_ROWS, filters["sender"],
                filters["subject"], filters["verdict"],
                *days_between(filters["since"], filters["until"], zone),
                held=bool(filters["held"]))
            taught = store.recently_taught(user)
            kept = {key: value for key, value in filters.items() if value}
            if user and session["admin"]:
                kept["user"] = user
            filter_query = "".join(f"&{key}={_quote(value)}" for key, value in kept.items())
            return shown(request, "review.html", session, store, rows=rows,
                         table=verdict_table(rows, session["admin"], select=True, zone=zone),
                         next_after=(f"{next_after[0]!r}:{next_after[1]}" if next_after
                                     else None),
                         filters=filters, filter_query=filter_query,
                         query=("?" + filter_query[1:]) if filter_query else "",
                         user=user, taught=taught)

    def signed_in(request: Request, page):
        """``page(request, session)`` for a signed-in session; the login page otherwise, and
        the log's failure named when it cannot be read."""
        session = current(request)
        if session is None:
            return to_login()
        try:
            return page(request, session)
        except StoreError as exc:
            return store_failed(request, session, exc)

    async def history(request: Request):
        return signed_in(request, listing)

    async def review(request: Request):
        return signed_in(request, queue_page)

    async def message(request: Request):
        session = current(request)
        if session is None:
            return to_login()
        try:
            with connections.use("read") as store:
                row = _own_row(store, request, session)
            if row is None:
                return page(request, "error.html", session, 404, message="no such message")
            body, attachments, body_cut = ((await run_in_threadpool(shown_texts.text_of, row))
                                           if row.has_raw else ("", [], False))
            with connections.use("read") as store:
                return shown(request, "message.html", session, store, row=row, body=body,
                             attachments=attachments, body_cut=body_cut,
                             rest=_rest(row), shared=needs_confirming(row))
        except StoreError as exc:
            return store_failed(request, session, exc)

    def teach_shown(request: Request, session: dict, action: str, confirmed: bool):
        with connections.use("teach") as store:
            row = _own_row(store, request, session)
            if row is None:
                return page(request, "error.html", session, 404, message="no such message")
            if action not in ACTIONS + RELEASE_ACTIONS:
                return HTMLResponse("unknown action", status_code=400)
            if clicks.asks_to_confirm(row, action) and not confirmed:
                return page(request, "confirm.html", session, row=row, action=action)
            said = clicks.one(store, row, action)
        return RedirectResponse(f"/message/{row.id}?notice={_quote(said)}", status_code=303)

    async def teach_one(request: Request):
        session, form, refused = await signed_post(request)
        if refused is not None:
            return refused
        try:
            return await run_in_threadpool(teach_shown, request, session,
                                           str(form.get("action", "")),
                                           form.get("confirm") == "shared")
        except StoreError as exc:
            said = str(exc)
            if not said.startswith("not done"):
                said = f"not done: {said}; nothing was taught"
            return store_failed(request, session, said)

    def teach_selected(session: dict, action: str, ids: list) -> str:
        with connections.use("teach") as store:
            numbers = (verdict_id(value) for value in ids[:PAGE_ROWS])
            rows = [store.get(number, None if session["admin"] else session["name"])
                    for number in numbers if number is not None]
            return clicks.many(store, [row for row in rows if row is not None], action)

    async def teach_many(request: Request):
        session, form, refused = await signed_post(request)
        if refused is not None:
            return refused
        action, ids = str(form.get("action", "")), form.getlist("ids")
        if form.get("all"):  # every row the page showed
            action, ids = str(form.get("all")), form.getlist("shown")
        elif form.get("one"):  # one row's own Undo
            action, ids = "undo", [form.get("one")]
        elif action == "undo":  # the recently taught, selected
            ids = form.getlist("undo_ids")
        if action not in ACTIONS:
            return HTMLResponse("unknown action", status_code=400)
        try:
            said = await run_in_threadpool(teach_selected, session, action, ids)
        except StoreError as exc:
            return store_failed(request, session, exc)
        back = same_view(request.query_params)
        return RedirectResponse(f"/review?notice={_quote(said)}" + (f"&{back}" if back else ""),
                                status_code=303)

    def release_chosen(request: Request, session: dict, action: str, selection: list,
                       confirmed: bool) -> HTMLResponse:
        owner = None if session["admin"] else session["name"]
        back = same_view(request.query_params)
        if not confirmed:  # a lesson to the shared model is confirmed first, as on its page
            with connections.use("teach") as store:
                chosen = (store.get(number, owner) for _, number in selection if number)
                shared = [row for row in chosen
                          if row is not None and clicks.asks_to_confirm(row, action)]
            if shared:
                return page(request, "confirm_release.html", session, rows=shared,
                            selection=selection, action=action, back=back)
        outcomes = clicks.release_many(lambda: connections.use("teach"), selection, owner,
                                       teach_too=action == "release-ham")
        return page(request, "released.html", session, outcomes=outcomes,
                    summary=summary(outcomes), back=back)

    async def release_selected(request: Request):
        """The held queue's "Release selected" (and teach as ham): each selected message
        released on its own, and a page that says what became of each."""
        session, form, refused = await signed_post(request)
        if refused is not None:
            return refused
        action, ids = str(form.get("action", "")), form.getlist("ids")
        if action not in RELEASE_ACTIONS:
            return HTMLResponse("unknown action", status_code=400)
        if len(ids) > MAX_RELEASE_ROWS:
            return page(request, "error.html", session, 400, message=(
                f"{len(ids)} messages were selected, and at most {MAX_RELEASE_ROWS} are "
                "released at a time: nothing was released; select fewer and click again"))
        if not ids:
            back = same_view(request.query_params)
            return RedirectResponse("/review?notice=" + _quote("nothing selected: tick the "
                                    "held messages to release") + (f"&{back}" if back else ""),
                                    status_code=303)
        try:
            return await run_in_threadpool(release_chosen, request, session, action,
                                           release_selection(ids),
                                           form.get("confirm") == "shared")
        except StoreError as exc:
            return store_failed(request, session, exc)

    def figures(user):
        with connections.use("stats") as store:
            return statistics(store, user, clock(), zone)

    async def stats(request: Request):
        session = current(request)
        if session is None:
            return to_login()
        user = scope_user(session, request)
        try:
            found = await run_in_threadpool(figures_cache.get, user, lambda: figures(user))
        except StoreError as exc:
            return store_failed(request, session, exc)
        try:
            pong = await run_in_threadpool(ping, user)
            from ..models.health import training_health

            health = training_health({"spam": int(pong.get("spam", 0)),
                                      "ham": int(pong.get("ham", 0))})
            model = {"spam": pong.get("spam"), "ham": pong.get("ham"),
                     "which": pong.get("model", "model"), "problems": health.problems}
        except Exception as exc:  # noqa: BLE001 - the scorer down: the page says so
            model = {"error": f"the scorer does not answer ({exc})"}
        return page(request, "stats.html", session, user=user, model=model, **found)

    async def stylesheet(request: Request):
        return Response(css, media_type="text/css")

    routes = [
        Route("/", home), Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]), Route("/logout", logout, methods=["POST"]),
        Route("/history", history), Route("/review", review, methods=["GET"]),
        Route("/review", teach_many, methods=["POST"]),
        Route("/review/release", release_selected, methods=["POST"]),
        Route("/message/{id}", message, methods=["GET"]),
        Route("/message/{id}/teach", teach_one, methods=["POST"]),
        Route("/stats", stats), Route("/static/style.css", stylesheet),
    ]
    app = Starlette(routes=routes)
    return SecurityHeaders(app)


def _own_row(store, request, session):
    """The verdict of the URL's id if this session may see it; None otherwise (404).
    StoreError when the log cannot be read (503)."""
    number = verdict_id(request.path_params["id"])
    if number is None:
        return None
    return store.get(number, None if session["admin"] else session["name"])


def _rest(row) -> float | None:
    """What the score holds beyond the prior and the recorded clues (the other tokens,
    and for the Bernoulli model the absent ones): prior + clues + rest = log-odds."""
    if not row.clues:
        return None
    return row.log_odds - (row.prior or 0.0) - sum(float(w) for _, w in row.clues)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text[:300], safe="")
