"""The table of verdicts that history and the review queue show, as HTML.

The table is most of a page: through a Jinja2 macro each of its cells costs an escape
call and a context look-up, so here it is one f-string per row, every value from the
row escaped by :func:`html.escape` (docs/review-page.md#pages-under-load). The page
around the table stays a template. The table's markup is this module's alone.
"""

from __future__ import annotations

import time
from html import escape

from markupsafe import Markup

__all__ = ["verdict_table", "when"]


def when(at: float) -> str:
    """A verdict's time, UTC, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def verdict_table(rows, admin: bool, select: bool = False) -> Markup:
    """rows (list[Row]) as the page's table: a checkbox per row with ``select`` (the
    review queue's bulk form), the user's column for an admin."""
    head = ("<table class=\"verdicts\">\n<thead><tr>" + ("<th></th>" if select else "")
            + "<th>Time (UTC)</th>" + ("<th>User</th>" if admin else "")
            + "<th>From</th><th>Subject</th><th>Verdict</th><th>Log-odds</th><th>P(spam)</th>"
              "<th>Clues</th><th>Done</th><th>Taught</th></tr></thead>\n<tbody>\n")
    out = [head]
    for row in rows:
        label = escape(row.label)
        link = f'<a href="/message/{int(row.id)}">'
        clues = ", ".join(f"<code>{escape(str(token))}</code> {float(weight):+.1f}"
                          for token, weight in row.clues[:3])
        out.append(
            f'<tr class="{label}" id="row-{int(row.id)}">'
            + (f'<td><input type="checkbox" name="ids" value="{int(row.id)}" '
               'aria-label="select"></td>' if select else "")
            + f"<td>{link}{when(row.at)}</a></td>"
            + (f"<td>{escape(row.user)}</td>" if admin else "")
            + f"<td>{escape(row.sender)}</td>"
            f"<td>{link}{escape(row.subject) or '(no subject)'}</a></td>"
            f'<td><span class="label {label}">{label}</span></td>'
            f'<td class="num">{row.log_odds:.2f}</td><td class="num">{row.p_spam:.3f}</td>'
            f'<td class="clues">{clues}</td><td>{escape(row.action)}</td>'
            f"<td>{escape(row.taught or '')}</td></tr>\n")
    if not rows:
        out.append(f"<tr><td colspan=\"11\">Nothing recorded{' to review' if select else ''}."
                   "</td></tr>\n")
    out.append("</tbody>\n</table>\n")
    return Markup("".join(out))
