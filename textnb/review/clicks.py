"""What a click on the review page does, and what the page then says: one message's
buttons (teach, undo, release) and the review queue's bulk buttons (teach, release).

Which rows a session may click on, its CSRF token and the answer's page are
:mod:`textnb.review.web`'s; a lesson is :func:`textnb.review.teach.teach`, a release
:func:`textnb.review.release.release`. Each click is one operation with its record in
the log, or "not done" and nothing changed; a bulk release is that operation once per
selected message, each on its own (:meth:`Clicks.release_many`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .query import verdict_id
from .release import (AlreadyReleased, NotHeld, ReleasedUnrecorded, ReleaseError, refusal,
                      release)
from .rows import Row
from .store import StoreError
from .teach import ACTIONS, TeachError, teach, teaching_user

__all__ = ["ACTIONS", "MAX_RELEASE_ROWS", "OUTCOMES", "RELEASE_ACTIONS", "Clicks", "Outcome",
           "needs_confirming", "release_selection", "summary"]

# A held message's buttons, beside teach's ACTIONS: release it, or release it and teach
# it as ham in the same operation.
RELEASE_ACTIONS = ("release", "release-ham")
# The most messages one bulk release takes: the form says so, and a request with more
# is refused whole. A page of the queue shows 50; this leaves room for a form built by
# hand, and bounds what one request may run (each release is a command of up to
# textnb.review.release.RELEASE_SECONDS).
MAX_RELEASE_ROWS = 100
# A bulk release begins no message past this many seconds: the rest are reported "not
# tried" for another click, so that the answer comes back within a reverse proxy's usual
# 60 s read timeout (a release usually takes well under a second).
BULK_RELEASE_SECONDS = 45.0
# What became of each message of a bulk release, in the order the result page counts them.
OUTCOMES = ("released", "released and taught as ham", "released, not recorded",
            "already released", "not held", "not yours", "no such message", "failed",
            "not tried")


@dataclass(frozen=True)
class Outcome:
    """One selected message of a bulk release: ``asked`` the id as the form sent it,
    ``row`` the verdict (None: none this session may see), ``outcome`` one of
    OUTCOMES, ``said`` what happened, in the words of the message's own page."""

    asked: str
    row: Row | None
    outcome: str
    said: str


def needs_confirming(row) -> bool:
    """Whether teaching this verdict changes the shared model: scored without a user
    under a model per user, its lesson goes to ``_shared``, which every new user's
    model starts from (textnb.delivery.users)."""
    return row.model == "shared" and teaching_user(row) is None


def release_selection(values) -> list[tuple[str, int | None]]:
    """The form's selected ids, each once and in its order, with the verdict id each
    names (None: malformed, an id that does not exist)."""
    seen = dict.fromkeys(str(value)[:40] for value in values)
    return [(asked, verdict_id(asked)) for asked in seen]


def summary(outcomes: list[Outcome]) -> str:
    """A bulk release in one line: how many messages had each outcome."""
    counts = {kind: 0 for kind in OUTCOMES}
    for found in outcomes:
        counts[found.outcome] += 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "nothing selected"


class Clicks:
    """The page's clicks, given how it reaches the scorer and the mail queue.

    learn, state: as :func:`textnb.review.teach.teach`'s.
    release_run (Callable | None): :func:`textnb.review.release.command_runner`'s
        function; None: held mail is not released here.
    clock: what the bulk release's time limit is measured by.
    """

    def __init__(self, learn, state=None, release_run=None, clock=time.monotonic):
        self.learn, self.state, self.release_run = learn, state, release_run
        self.clock = clock

    @staticmethod
    def asks_to_confirm(row, action: str) -> bool:
        """Whether ``action`` on ``row`` teaches the shared model (a release alone does not)."""
        return action != "release" and needs_confirming(row)

    def one(self, store, row, action: str) -> str:
        """One message's button (ACTIONS or RELEASE_ACTIONS); RETURNS what the page says.
        StoreError when the log cannot be read or written."""
        if action in RELEASE_ACTIONS:
            return self.release(store, row, teach_too=action == "release-ham")[1]
        try:
            return teach(store, row, action, self.learn, state=self.state)
        except TeachError as exc:
            return f"not done: {exc}"

    def many(self, store, rows: list, action: str) -> str:
        """The queue's bulk button (one of ACTIONS) on ``rows``; RETURNS what the page
        says. Verdicts of the shared model are left out: each asks to be confirmed."""
        done, failed, shared = 0, [], 0
        for row in rows:
            if needs_confirming(row):
                shared += 1
                continue
            try:
                teach(store, row, action, self.learn, state=self.state)
                done += 1
            except TeachError as exc:
                failed.append(str(exc))
        said = f"{done} " + {"forget": "forgotten", "undo": "undone"}.get(action,
                                                                       "taught as " + action)
        if shared:
            said += (f"; {shared} not done: verdicts of the shared model, which every new "
                     "user's model starts from: teach each from its own page, which asks "
                     "to confirm")
        if failed:
            said += f"; {len(failed)} not done: {failed[0]}"
        return said

    def release(self, store, row, teach_too: bool) -> tuple[str, str]:
        """Release one held message, and with ``teach_too`` teach it as ham in the same
        operation; RETURNS (its outcome, one of OUTCOMES; what the page says). The
        message's own buttons and the bulk release both come here. StoreError when the
        log cannot be read or written (then nothing changed)."""
        try:
            said = self._release(store, row, teach_too)
        except ReleasedUnrecorded as exc:
            return "released, not recorded", str(exc)
        except AlreadyReleased as exc:
            return "already released", f"not done: {exc}"
        except NotHeld as exc:
            return "not held", f"not done: {exc}"
        except (TeachError, ReleaseError) as exc:
            return "failed", f"not done: {exc}"
        return ("released and taught as ham" if teach_too else "released"), said

    def release_many(self, open_log, selection: list[tuple[str, int | None]],
                     owner: str | None, teach_too: bool,
                     seconds: float = BULK_RELEASE_SECONDS) -> list[Outcome]:
        """The queue's bulk release: :meth:`release` for each selected message on its
        own, so one that fails, or is not held, or not ``owner``'s, leaves the others
        as they would be alone. RETURNS each message's :class:`Outcome`, in the
        selection's order.

        open_log (Callable): a context manager giving the log (the page's teaching
            connection), taken for one message at a time, so other clicks get in
            between. selection: :func:`release_selection`'s. owner (str | None): whose
            messages may be released (None: an admin's, anyone's); each row is read
            again just before its release. seconds: no message is begun past this.
        The confirmation a lesson to the shared model asks for is the caller's, before
        this is called (:meth:`asks_to_confirm`).
        """
        ends = self.clock() + seconds
        outcomes = []
        for asked, number in selection:
            if self.clock() > ends:
                outcomes.append(Outcome(asked, None, "not tried",
                                        f"not tried: the request ran out of its {seconds:g} s; "
                                        "select it again"))
                continue
            row = None
            try:
                with open_log() as store:
                    row = store.get(number, owner) if number is not None else None
                    if row is None:
                        outcomes.append(_not_found(asked, owner))
                        continue
                    outcome, said = self.release(store, row, teach_too)
            except StoreError as exc:  # this message's operation only: the next may get in
                said = str(exc)
                outcome, said = "failed", (said if said.startswith("not done")
                                           else f"not done: {said}")
            outcomes.append(Outcome(asked, row, outcome, said))
        return outcomes

    def _release(self, store, row, teach_too: bool) -> str:
        if self.release_run is None:  # a rejected message says why first: it never could be
            raise refusal(row) or ReleaseError(
                "releasing held mail is not set up on this page (textnb web "
                "--release-command; docs/review-page.md#releasing-held-mail)")
        return release(store, row, self.release_run, self.learn if teach_too else None,
                       self.state)


def _not_found(asked: str, owner: str | None) -> Outcome:
    """A selected id this session may not release: to a user, another's message and one
    that does not exist are the same answer, as on every page."""
    if owner is None:
        return Outcome(asked, None, "no such message", "not done: no such message")
    return Outcome(asked, None, "not yours", "not done: no message of yours has this id")
