"""The statistics page's figures: verdicts per hour and per day of the page's clock,
the last week's log-odds, what was taught; the charts drawn by :mod:`textnb.review.charts`."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import time as dtime

from markupsafe import Markup

from . import charts
from .table import zone_label

__all__ = ["statistics"]


def statistics(store, user, now: float, zone) -> dict:
    """The statistics page's figures: bars per hour (the last 48, the current one last)
    and per day (the last 30, today last) of ``zone``'s clock, each labelled with the
    hour or day it counts. Days are counted from quarter hours (every zone's offset is
    a whole number of them), so a day of 23 or 25 hours is counted as the clock has it."""
    local = datetime.fromtimestamp(now, zone)
    hour = local.replace(minute=0, second=0, microsecond=0).timestamp() - 47 * 3600
    first_day = datetime.combine(local.date() - timedelta(days=29), dtime(0), zone)
    day = first_day.timestamp()
    hourly = _buckets(store.counts(user, hour, 3600), 48)
    daily = [{} for _ in range(30)]
    for quarter, label, count in store.counts(user, day, 900):
        index = (datetime.fromtimestamp(day + quarter * 900, zone).date() - first_day.date()).days
        if 0 <= index < 30:
            daily[index][label] = daily[index].get(label, 0) + count
    hour_labels = [datetime.fromtimestamp(hour + i * 3600, zone).strftime("%d %Hh")
                   for i in range(48)]
    day_labels = [(first_day.date() + timedelta(days=i)).strftime("%m-%d") for i in range(30)]
    scores = store.scores(user, now - 7 * 86400)
    totals = {label: sum(b.get(label, 0) for b in daily) for label in ("spam", "unsure", "ham")}
    named = zone_label(zone, now)
    return {
        "per_hour": Markup(charts.stacked_bars(hourly, hour_labels,
                                               f"verdicts per hour ({named}), last 48 hours")),
        "per_day": Markup(charts.stacked_bars(daily, day_labels,
                                              f"verdicts per day ({named}), last 30 days")),
        "score_histogram": Markup(charts.histogram(scores, "log-odds of the last 7 days")),
        "totals": totals,
        "taught": store.db.execute(
            "SELECT taught, count(*) FROM verdicts WHERE taught IS NOT NULL"
            + (" AND user = ?" if user else "") + " GROUP BY taught",
            (user,) if user else ()).fetchall(),
    }


def _buckets(counts, n: int) -> list[dict]:
    out = [{} for _ in range(n)]
    for bucket, label, count in counts:
        if 0 <= bucket < n:
            out[bucket][label] = count
    return out
