"""Releasing held mail from the review page: *Release* and *Release and teach as ham*.

The milter holds spam above ``--quarantine-above`` in Postfix's hold queue and records
its verdict as ``quarantined``, with the message's queue id (textnb.delivery.milter).
Releasing needs root (``postsuper -H``), and the page does not run as root: it runs the
command the operator gives it (``textnb web --release-command``, typically ``sudo -n
/usr/local/bin/textnb-release``, :mod:`textnb.delivery.hold_queue`) with the queue id
as its one argument, an argument list, never a shell, and the id checked first: a
field of the log is as untrusted as the mail it came from.

A click is one operation with its record in the log, as a lesson is
(:func:`textnb.review.teach.teach`): the log's write lock is taken first, the lesson
(with *and teach as ham*) is given and marked, the row is marked ``released``, and the
release runs last, since it alone cannot be taken back. When it fails (the message is
no longer on hold, the command refused) the marks are rolled back and the lesson is
taken back: the page says "not done" and nothing changed. Mail the milter rejected was
refused in SMTP and never accepted: there is nothing to release.
"""

from __future__ import annotations

import subprocess

from ..delivery.hold_queue import EXIT_GONE, EXIT_NOT_HELD, EXIT_RELEASED, valid_queue_id
from ..errors import TextnbError
from .rows import HELD
from .store import StoreError
from .teach import teach

__all__ = ["HELD", "RELEASED", "AlreadyReleased", "NotHeld", "ReleaseError",
           "ReleasedUnrecorded", "command_runner", "refusal", "release"]

RELEASED = "released"
# Seconds the release command may take (sudo, the interpreter, and at most four Postfix
# commands of textnb.delivery.hold_queue.COMMAND_SECONDS each); the log's write lock is
# held meanwhile, as it is while the scorer learns.
RELEASE_SECONDS = 60


class ReleaseError(TextnbError):
    """The message was not released: not held, no longer on hold, or the command failed."""


class AlreadyReleased(ReleaseError):
    """Not released now: released before, by another click or by hand."""


class NotHeld(ReleaseError):
    """Not released: the message is not on hold (rejected in SMTP, delivered, or gone
    from the mail queue)."""


class ReleasedUnrecorded(ReleaseError):
    """The message was released, and the log could not record it (the lesson, if any,
    was taken back): the one outcome that is not all or nothing, since a release cannot
    be undone."""


def command_runner(command: list[str], timeout: float = RELEASE_SECONDS):
    """A ``run(queue_id) -> (status, line)`` that runs ``command`` + [queue_id]: the
    status is one of textnb.delivery.hold_queue's EXIT_* and the line what it said."""
    command = [str(part) for part in command]

    def run(queue_id: str) -> tuple[int, str]:
        if not valid_queue_id(queue_id):
            raise ReleaseError(f"{queue_id!r} is not a Postfix queue id")
        try:
            done = subprocess.run([*command, queue_id], capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ReleaseError(f"the release command did not finish within {timeout:g} s, "
                               "and may have released the message before it was stopped: "
                               "click Release again to see (mail no longer on hold says "
                               "so)") from None
        except (OSError, subprocess.SubprocessError) as exc:
            raise ReleaseError(f"the release command {command[0]} did not run ({exc})") from None
        said = (done.stdout.strip() or done.stderr.strip()).decode("utf-8", "replace")
        return done.returncode, (said.splitlines() or [""])[-1][:300]

    return run


def refusal(row) -> ReleaseError | None:
    """Why a recorded verdict cannot be released, as the error to raise (its class says
    which case: :class:`AlreadyReleased`, :class:`NotHeld`); None when it can."""
    if row.action == "rejected":
        return NotHeld("the milter rejected this message in SMTP: the sender was refused "
                       "(550) and no copy was accepted, so there is nothing to release")
    if row.action == RELEASED:
        return AlreadyReleased("already released")
    if row.action != HELD:
        return NotHeld(f"this message was not held (the mail path: {row.action})")
    if not valid_queue_id(row.queue_id):
        return ReleaseError("no Postfix queue id was recorded for this message; release it "
                            "with postsuper -H")
    return None


def release(store, row, run, learn=None, state=None) -> str:
    """Release one held message (and teach it as ham with ``learn``); RETURNS what the
    page says. ReleaseError (AlreadyReleased, NotHeld: why not; or TeachError,
    StoreError) when it was not done; then nothing changed.

    store (VerdictStore): where ``row`` is. run: :func:`command_runner`'s function.
    learn, state: as :func:`textnb.review.teach.teach`'s; learn None: release only.
    """
    refused = refusal(row)
    if refused is not None:
        raise refused
    released = []

    def release_now(current, said: str) -> str:
        refused = refusal(current)  # as the row is now: another click may have released it
        if refused is not None:
            raise refused
        store.mark_action(current.id, RELEASED)
        status, line = run(current.queue_id)
        if status == EXIT_RELEASED:
            released.append(current.queue_id)
            return "released" + (f"; {said}" if said else "")
        if status == EXIT_NOT_HELD:
            raise AlreadyReleased(f"it is no longer on hold: released already ({line})")
        if status == EXIT_GONE:
            raise NotHeld(f"it is no longer in the mail queue: delivered, deleted or "
                          f"expired ({line})")
        raise ReleaseError(f"the release command failed (status {status}): {line}")

    try:
        return teach(store, row, "ham" if learn is not None else None, learn,
                     then=release_now, state=state)
    except StoreError as exc:
        if not released:
            raise
        raise ReleasedUnrecorded(f"released from hold, but the log could not record it "
                                 f"({exc})") from None
