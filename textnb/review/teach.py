"""Teaching from the review page: through the scorer, as ``textnb-client --learn`` does.

The page never touches a model file. Each click is one LEARN or FORGET request to the
resident scorer (``textnb.delivery.client.learn_remote``), which journals it, applies it through
the ledger (exactly once per message digest: a repeat is ``known``, the other label
``moved``) and acknowledges it, so a click is as durable as a client's learn.

Undo puts the message back where it was before the page first taught it. The scorer's
answer to that first request says where that was (``new``: the model did not have it;
``moved``: it had the other label; ``known``: this one; a FORGET's answer: the label it
had, or ``not-found``), and the row keeps it in ``before``; undo sends FORGET (it was
absent) or LEARN with that label. A row the page has taught as ``spam`` that is clicked
``spam`` again sends nothing.

A click happens completely or not at all (:func:`teach`): the log's write lock is
taken before the scorer is asked, the row is marked in that transaction, and a commit
that fails is undone at the scorer by the inverse of what its answer says it did. A
request whose reply is lost (the connection dropped after the scorer learned) is not a
failure until the scorer says so: the page asks it how the model has the message (STATE,
before the request and after), and marks the lesson when it was made
(:func:`_reconcile`), so the log and the model agree.
"""

from __future__ import annotations

import threading

from ..delivery.client import NoAnswer
from ..errors import TextnbError
from .store import StoreError

__all__ = ["ACTIONS", "TeachError", "teach", "teaching_user"]

ACTIONS = ("spam", "ham", "forget", "undo")
_OTHER = {"spam": "ham", "ham": "spam"}
# One teaching at a time in this process: two quick clicks on one row must not both
# read 'before' as unset.
_LOCK = threading.Lock()


class TeachError(TextnbError):
    """The scorer could not be told (down, refused), or the message is no longer kept."""


def teach(store, row, action: str, learn, then=None, state=None) -> str:
    """Teach one recorded verdict's message; RETURNS what the page says happened.

    The lesson and its record in the log are one operation: the log's write lock is
    taken first (a locked or damaged log refuses the lesson before the scorer is told:
    StoreError), the row is marked inside that transaction once the scorer has answered,
    and when the commit fails after all, the scorer is told the inverse of what it just
    did (its answer says what that is), so that either both changed or neither did.

    store (VerdictStore): where ``row`` is, and its raw message.
    action (str | None): 'spam', 'ham', 'forget' or 'undo'; None: no lesson, only ``then``.
    learn (Callable[[bytes, str | None, str | None], str]): sends LEARN (a label) or
        FORGET (None) for a user (None: the scorer's one model) and returns the scorer's
        answer ('spam new', 'ham', 'not-found', ...); raises on failure.
    then (Callable[[Row, str], str] | None): a last step of the same operation, given
        the row as it is and what the page would say, run once the lesson is marked and
        before the commit (releasing a held message, :mod:`textnb.review.release`):
        RETURNS what the page says; when it raises, the lesson is taken back and the
        log left as it was.
    state (Callable[[bytes, str | None], str] | None): asks the scorer how the model
        has a message now ('spam', 'ham', 'absent'; textnb.delivery.client.learned_as),
        before each request and again when its reply is lost (:func:`_reconcile`);
        None: a lost reply is a failure.
    """
    if action not in ACTIONS and not (action is None and then is not None):
        raise TeachError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    user = teaching_user(row)
    with _LOCK:
        try:
            store.begin_lesson(row.id)
        except StoreError as exc:
            raise StoreError(f"not done: {exc}; nothing was taught") from None
        sent = None
        try:
            row = store.get(row.id, None)  # as it is now, not as the page showed it
            said, sent = (("", None) if action is None
                          else _lesson(store, row, action, learn, user, state))
            if then is not None:
                said = then(row, said)
            store.end_lesson(commit=True)
        except StoreError as exc:
            store.end_lesson(commit=False)
            if sent is None:
                raise
            raise StoreError(f"not done: {exc}; "
                             + _take_back(learn, sent, user, state)) from None
        except TextnbError as exc:
            store.end_lesson(commit=False)
            if sent is None:
                raise
            raise type(exc)(f"{exc}; " + _take_back(learn, sent, user, state)) from None
        except BaseException:
            store.end_lesson(commit=False)
            raise
    return said


def teaching_user(row) -> str | None:
    """The user whose model a verdict's lesson goes to; None: the scorer's one model, or
    the shared model (a verdict scored without a user)."""
    return None if row.model == "model" or not row.user else row.user


def _lesson(store, row, action: str, learn, user, state=None):
    """(what the page says, (raw, label sent, the scorer's answer) or None when nothing
    was sent), with the row marked."""
    if action == "undo":
        if row.before is None:
            return "nothing to undo", None
        raw = _raw(store, row)
        label = None if row.before == "absent" else row.before
        sent = (raw, label, _send(learn, raw, label, user, state))
        store.mark(row.id, None, None)
        return "undone: " + ("forgotten again" if row.before == "absent"
                             else f"learned as {row.before} again"), sent
    if (row.taught == action) or (action == "forget" and row.taught == "forgotten"):
        return f"already {'forgotten' if action == 'forget' else 'taught as ' + action}", None
    raw = _raw(store, row)
    if action == "forget":
        answer = _send(learn, raw, None, user, state)
        before = row.before or (answer if answer in _OTHER else "absent")
        store.mark(row.id, "forgotten", before)
        return ("forgotten" if answer in _OTHER else "forgotten (the model did not have it)",
                (raw, None, answer))
    answer = _send(learn, raw, action, user, state)
    outcome = answer.split()[-1]
    before = row.before or {"new": "absent", "moved": _OTHER[action]}.get(outcome, action)
    store.mark(row.id, action, before)
    return (f"taught as {action}" + (" (the model had it so already)" if outcome == "known" else ""),
            (raw, action, answer))


def _take_back(learn, sent, user, state=None) -> str:
    """Undo at the scorer what one request did, from its answer: a LEARN that was
    ``new`` is forgotten, one that ``moved`` the message is learned as the other label
    again, one ``known`` changed nothing; a FORGET that removed a label learns it again.
    RETURNS what the page says of it."""
    raw, label, answer = sent
    outcome = answer.split()[-1]
    if label is None:
        inverse = (answer,) if answer in _OTHER else ()
    else:
        inverse = {"new": (None,), "moved": (_OTHER[label],)}.get(outcome, ())
    if not inverse:
        return "the model did not change: nothing changed"
    try:
        _send(learn, raw, inverse[0], user, state)
    except TeachError as exc:
        raise TeachError(f"the log did not take the lesson and the scorer could not be put "
                         f"back ({exc}): the model has it as {label or 'forgotten'}, the log "
                         "does not say so; click it again once the log can be written") from None
    return "the scorer was put back: nothing changed"


def _raw(store, row) -> bytes:
    raw = store.raw(row.id)
    if raw is None:
        raise TeachError("this message is no longer kept (retention or the size cap); "
                         "teach it from your mail client with textnb-client --learn")
    return raw


def _send(learn, raw: bytes, label: str | None, user: str | None, state=None) -> str:
    """The scorer's answer to LEARN ``label`` (FORGET: None); when the request was sent
    and its reply lost, the answer it would have had (:func:`_reconcile`)."""
    before = None
    if state is not None:
        try:
            before = state(raw, user)
        except Exception:  # noqa: BLE001 - then a lost reply cannot be reconciled
            before = None
    try:
        return learn(raw, label, user)
    except TextnbError:
        raise
    except NoAnswer as exc:
        return _reconcile(state, raw, label, user, before, exc)
    except Exception as exc:  # noqa: BLE001 - the scorer is down or refused: say so
        raise TeachError(f"the scorer did not take it: {exc}") from None


def _reconcile(state, raw: bytes, label: str | None, user: str | None, before: str | None,
               lost: Exception) -> str:
    """A request was sent and its reply lost: the scorer may have made the update (it
    journals and applies it before it answers). Ask how the model has the message now:
    as the request wanted, it was made, and RETURNS the answer it had (from how the
    model had it ``before``), so the lesson is marked as if answered; as before, it
    was not (TeachError: nothing changed). When the scorer cannot say, TeachError says
    the model may have it: a second click finishes it (a lesson given twice counts
    once), though with ``before`` then read after the first, Undo may not restore the
    state before both."""
    wanted = label or "absent"
    if state is None or before is None:
        raise TeachError(f"the scorer did not answer ({lost}); it may have taken the lesson: "
                         "click it again (a lesson given twice counts once)")
    try:
        now = state(raw, user)
    except Exception as exc:  # noqa: BLE001 - say what is known, and what is not
        raise TeachError(f"the scorer did not answer ({lost}) and cannot say whether it took "
                         f"the lesson ({exc}): the model may have it as {wanted}, the log "
                         "does not say so; click it again once the scorer answers (a "
                         "lesson given twice counts once)") from None
    if now == wanted:
        if label is None:
            return before if before in _OTHER else "not-found"
        return f"{label} " + ("known" if before == label else
                              "new" if before == "absent" else "moved")
    if now == before:
        raise TeachError(f"the scorer did not answer ({lost}) and did not take the lesson: "
                         "nothing changed")
    raise TeachError(f"the scorer did not answer ({lost}); the model has it as {now} now, "
                     "changed by another lesson meanwhile: click it again")
