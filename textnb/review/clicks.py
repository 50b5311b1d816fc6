"""What a click on the review page does, and what the page then says: one message's
buttons (teach, undo, release) and the review queue's bulk buttons.

Which rows a session may click on, its CSRF token and the answer's redirect are
:mod:`textnb.review.web`'s; a lesson is :func:`textnb.review.teach.teach`, a release
:func:`textnb.review.release.release`. Each click is one operation with its record in
the log, or "not done" and nothing changed.
"""

from __future__ import annotations

from .release import ReleasedUnrecorded, ReleaseError, refusal, release
from .teach import ACTIONS, TeachError, teach, teaching_user

__all__ = ["ACTIONS", "RELEASE_ACTIONS", "Clicks", "needs_confirming"]

# A held message's buttons, beside teach's ACTIONS: release it, or release it and teach
# it as ham in the same operation.
RELEASE_ACTIONS = ("release", "release-ham")


def needs_confirming(row) -> bool:
    """Whether teaching this verdict changes the shared model: scored without a user
    under a model per user, its lesson goes to ``_shared``, which every new user's
    model starts from (textnb.delivery.users)."""
    return row.model == "shared" and teaching_user(row) is None


class Clicks:
    """The page's clicks, given how it reaches the scorer and the mail queue.

    learn, state: as :func:`textnb.review.teach.teach`'s.
    release_run (Callable | None): :func:`textnb.review.release.command_runner`'s
        function; None: held mail is not released here.
    """

    def __init__(self, learn, state=None, release_run=None):
        self.learn, self.state, self.release_run = learn, state, release_run

    @staticmethod
    def asks_to_confirm(row, action: str) -> bool:
        """Whether ``action`` on ``row`` teaches the shared model (a release alone does not)."""
        return action != "release" and needs_confirming(row)

    def one(self, store, row, action: str) -> str:
        """One message's button (ACTIONS or RELEASE_ACTIONS); RETURNS what the page says.
        StoreError when the log cannot be read or written."""
        try:
            if action in RELEASE_ACTIONS:
                return self._release(store, row, teach_too=action == "release-ham")
            return teach(store, row, action, self.learn, state=self.state)
        except ReleasedUnrecorded as exc:
            return str(exc)
        except (TeachError, ReleaseError) as exc:
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

    def _release(self, store, row, teach_too: bool) -> str:
        if self.release_run is None:  # a rejected message says why first: it never could be
            raise ReleaseError(refusal(row) or "releasing held mail is not set up on this "
                               "page (textnb web --release-command; "
                               "docs/review-page.md#releasing-held-mail)")
        return release(store, row, self.release_run, self.learn if teach_too else None,
                       self.state)
