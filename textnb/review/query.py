"""What a request's URL or form may say to the review page, parsed: a verdict id, the
review queue's filters and its "More" cursor. Anything malformed is no value (an id
that does not exist, no filter), never an error."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from datetime import time as dtime

__all__ = ["MAX_ID", "QUEUE_FILTERS", "days_between", "queue_cursor", "queue_filters",
           "same_view", "verdict_id"]

# The review queue's filters (query parameters): sender and subject contain, the
# verdict, the first and last day (in the page's time zone), and held mail only.
QUEUE_FILTERS = ("sender", "subject", "verdict", "since", "until", "held")
# The largest verdict id SQLite holds; a larger number in a URL or a form is no id.
MAX_ID = 2**63 - 1


def queue_filters(params) -> dict:
    """The review queue's filters from a query string, each cut to a sane length; an
    unknown verdict or a malformed day is no filter."""
    found = {key: str(params.get(key, ""))[:200] for key in QUEUE_FILTERS}
    if found["verdict"] not in ("spam", "unsure", "ham"):
        found["verdict"] = ""
    if found["held"] != "1":
        found["held"] = ""
    for key in ("since", "until"):
        if day_start(found[key]) is None:
            found[key] = ""
    return found


def same_view(params) -> str:
    """The review queue's filters (and an admin's user) of a request's query string, as
    ``key=value&...``: what a form's answer links back to, to show the same view."""
    from urllib.parse import quote

    return "&".join(f"{key}={quote(str(value)[:300], safe='')}" for key, value in params.items()
                    if key in QUEUE_FILTERS + ("user",))


def day_start(text: str, zone=timezone.utc, after: int = 0) -> float | None:
    """The start of the day given as YYYY-MM-DD in ``zone`` (of the day ``after`` it);
    None for anything else."""
    try:
        day = datetime.strptime(text, "%Y-%m-%d").date() + timedelta(days=after)
    except ValueError:
        return None
    return datetime.combine(day, dtime(0), zone).timestamp()


def days_between(since: str, until: str,
                 zone=timezone.utc) -> tuple[float | None, float | None]:
    """(since, until) as times: from the start of ``since`` to the end of ``until``."""
    return day_start(since, zone), day_start(until, zone, after=1)


def queue_cursor(text: str) -> tuple[float, int] | None:
    """The queue's "More" cursor, "distance:id"; None when malformed."""
    distance, _, number = text.partition(":")
    try:
        value = float(distance)
    except ValueError:
        return None
    number = verdict_id(number)
    return (value, number) if number is not None and math.isfinite(value) else None


def verdict_id(text) -> int | None:
    """A verdict id from a URL or a form: ASCII digits naming a number SQLite can hold;
    None for anything else (answered as an id that does not exist)."""
    text = str(text)
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    number = int(text)
    return number if 0 < number <= MAX_ID else None
