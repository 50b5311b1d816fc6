"""The table of verdicts that history and the review queue show, as HTML.

The table is most of a page: through a Jinja2 macro each of its cells costs an escape
call and a context look-up, so here it is one f-string per row, every value from the
row escaped by :func:`html.escape` (docs/review-page.md#pages-under-load). The page
around the table stays a template. The table's markup is this module's alone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

from markupsafe import Markup

from .rows import HELD

__all__ = ["verdict_table", "when", "zone_label"]


def when(at: float, zone=timezone.utc) -> str:
    """A verdict's time in ``zone`` (a tzinfo), to the second."""
    return datetime.fromtimestamp(at, zone).strftime("%Y-%m-%d %H:%M:%S")


def zone_label(zone, at: float | None = None) -> str:
    """What the page calls ``zone``: its abbreviation now (CET, UTC), or its name."""
    found = datetime.fromtimestamp(at, zone) if at is not None else datetime.now(zone)
    return found.strftime("%Z") or str(zone)


def verdict_table(rows, admin: bool, select: bool = False, zone=timezone.utc) -> Markup:
    """rows (list[Row]) as the page's table: a checkbox per row with ``select`` (the
    review queue's bulk form), the user's column for an admin. Each cell's class names
    its column (the narrow layout of style.css hides some); times in ``zone``."""
    head = ("<table class=\"verdicts\">\n<thead><tr>"
            + ("<th class=\"c-select\"><span class=\"hidden\">Select</span></th>" if select else "")
            + f"<th class=\"c-time\">Time ({escape(zone_label(zone))})</th>"
            + ("<th class=\"c-user\">User</th>" if admin else "")
            + "<th class=\"c-from\">From</th><th class=\"c-subject\">Subject</th>"
              "<th class=\"c-verdict\">Verdict</th><th class=\"c-lo\">Log-odds</th>"
              "<th class=\"c-p\">P(spam)</th><th class=\"c-clues\">Clues</th>"
              "<th class=\"c-done\">Done</th><th class=\"c-taught\">Taught</th></tr></thead>\n<tbody>\n")
    out = [head]
    for row in rows:
        label = escape(row.label)
        link = f'<a href="/message/{int(row.id)}">'
        subject = escape(row.subject) or "(no subject)"
        clues = ", ".join(f"<code>{escape(str(token))}</code> {float(weight):+.1f}"
                          for token, weight in row.clues[:3])
        out.append(
            f'<tr class="{label}" id="row-{int(row.id)}">'
            + (f'<td class="c-select"><input type="checkbox" name="ids" value="{int(row.id)}" '
               f'id="select-{int(row.id)}" aria-label="select: {subject}"></td>' if select else "")
            + f'<td class="c-time">{link}{when(row.at, zone)}</a></td>'
            + (f'<td class="c-user">{escape(row.user)}</td>' if admin else "")
            + f'<td class="c-from">{escape(row.sender)}</td>'
            f'<td class="c-subject">{link}{subject}</a></td>'
            f'<td class="c-verdict"><span class="label {label}">{label}</span></td>'
            f'<td class="num c-lo">{row.log_odds:.2f}</td><td class="num c-p">{row.p_spam:.3f}</td>'
            f'<td class="clues c-clues">{clues}</td><td class="c-done">{escape(_done(row.action))}</td>'
            f'<td class="c-taught">{escape(row.taught or "")}</td></tr>\n')
    if not rows:
        out.append(f"<tr><td colspan=\"11\">Nothing recorded{' to review' if select else ''}."
                   "</td></tr>\n")
    out.append("</tbody>\n</table>\n")
    return Markup("".join(out))


def _done(action: str) -> str:
    """What the table's Done column calls the mail path's action: the milter's
    'quarantined' is mail the page can release (textnb.review.release)."""
    return "held" if action == HELD else action
