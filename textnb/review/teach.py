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
"""

from __future__ import annotations

import threading

from ..errors import TextnbError

__all__ = ["ACTIONS", "TeachError", "teach"]

ACTIONS = ("spam", "ham", "forget", "undo")
_OTHER = {"spam": "ham", "ham": "spam"}
# One teaching at a time in this process: two quick clicks on one row must not both
# read 'before' as unset.
_LOCK = threading.Lock()


class TeachError(TextnbError):
    """The scorer could not be told (down, refused), or the message is no longer kept."""


def teach(store, row, action: str, learn) -> str:
    """Teach one recorded verdict's message; RETURNS what the page says happened.

    store (VerdictStore): where ``row`` is, and its raw message.
    action (str): 'spam', 'ham', 'forget' or 'undo'.
    learn (Callable[[bytes, str | None, str | None], str]): sends LEARN (a label) or
        FORGET (None) for a user (None: the scorer's one model) and returns the scorer's
        answer ('spam new', 'ham', 'not-found', ...); raises on failure.
    """
    if action not in ACTIONS:
        raise TeachError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    # one model: no user; a verdict scored without a user (recorded as ""): the shared model
    user = None if row.model == "model" or not row.user else row.user
    with _LOCK:
        row = store.get(row.id, None)  # as it is now, not as the page showed it
        if action == "undo":
            if row.before is None:
                return "nothing to undo"
            raw = _raw(store, row)
            _send(learn, raw, None if row.before == "absent" else row.before, user)
            store.mark(row.id, None, None)
            return "undone: " + ("forgotten again" if row.before == "absent"
                                 else f"learned as {row.before} again")
        if (row.taught == action) or (action == "forget" and row.taught == "forgotten"):
            return f"already {'forgotten' if action == 'forget' else 'taught as ' + action}"
        raw = _raw(store, row)
        if action == "forget":
            answer = _send(learn, raw, None, user)
            before = row.before or (answer if answer in _OTHER else "absent")
            store.mark(row.id, "forgotten", before)
            return "forgotten" if answer in _OTHER else "forgotten (the model did not have it)"
        answer = _send(learn, raw, action, user)
        outcome = answer.split()[-1]
        before = row.before or {"new": "absent", "moved": _OTHER[action]}.get(outcome, action)
        store.mark(row.id, action, before)
        return f"taught as {action}" + (" (the model had it so already)" if outcome == "known" else "")


def _raw(store, row) -> bytes:
    raw = store.raw(row.id)
    if raw is None:
        raise TeachError("this message is no longer kept (retention or the size cap); "
                         "teach it from your mail client with textnb-client --learn")
    return raw


def _send(learn, raw: bytes, label: str | None, user: str | None) -> str:
    try:
        return learn(raw, label, user)
    except TextnbError:
        raise
    except Exception as exc:  # noqa: BLE001 - the scorer is down or refused: say so
        raise TeachError(f"the scorer did not take it: {exc}") from None
