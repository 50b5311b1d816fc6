"""The statistics page's charts, drawn here as inline SVG: no script, nothing fetched.

Two shapes: stacked bars of verdicts per time bucket (spam, unsure, ham), and a
histogram of log-odds with the threshold drawn as a line. Every number is formatted
here and every label escaped, so the SVG is markup the page's templates insert as is.
"""

from __future__ import annotations

from html import escape

__all__ = ["COLOURS", "histogram", "stacked_bars"]

COLOURS = {"spam": "#c0392b", "unsure": "#e0a800", "ham": "#2e7d32"}
WIDTH, HEIGHT, PAD = 640, 180, 28


def stacked_bars(buckets: list[dict], labels: list[str], title: str) -> str:
    """buckets: one {'spam': n, 'ham': n, 'unsure': n} per bar, oldest first; labels:
    the x-axis label of each bar (every few are shown)."""
    top = max([sum(b.values()) for b in buckets] + [1])
    n = max(len(buckets), 1)
    width = (WIDTH - 2 * PAD) / n
    parts = [_open(title)]
    for i, bucket in enumerate(buckets):
        y = HEIGHT - PAD
        for label in ("ham", "unsure", "spam"):
            count = bucket.get(label, 0)
            if not count:
                continue
            h = (HEIGHT - 2 * PAD) * count / top
            y -= h
            parts.append(f'<rect x="{PAD + i * width:.1f}" y="{y:.1f}" width="{max(width - 1, 1):.1f}" '
                         f'height="{h:.1f}" fill="{COLOURS[label]}"><title>{escape(labels[i])}: '
                         f'{count} {label}</title></rect>')
    step = max(1, n // 8)
    for i in range(0, n, step):
        parts.append(f'<text x="{PAD + i * width:.1f}" y="{HEIGHT - 8}" font-size="10">'
                     f'{escape(labels[i])}</text>')
    parts.append(f'<text x="2" y="{PAD - 6}" font-size="10">{top}</text>')
    parts.append(_legend())
    return "".join(parts) + "</svg>"


def histogram(scores: list[tuple[float, float]], title: str, bins: int = 40) -> str:
    """scores: (log-odds, threshold) pairs; log-odds are clipped to [-20, 20]."""
    lo, hi = -20.0, 20.0
    counts = [0] * bins
    for value, _ in scores:
        i = int((min(max(value, lo), hi - 1e-9) - lo) / (hi - lo) * bins)
        counts[i] += 1
    top = max(counts + [1])
    width = (WIDTH - 2 * PAD) / bins
    parts = [_open(title)]
    for i, count in enumerate(counts):
        if count:
            h = (HEIGHT - 2 * PAD) * count / top
            left = lo + i * (hi - lo) / bins
            parts.append(f'<rect x="{PAD + i * width:.1f}" y="{HEIGHT - PAD - h:.1f}" '
                         f'width="{max(width - 1, 1):.1f}" height="{h:.1f}" fill="#555">'
                         f'<title>log-odds {left:g} to {left + (hi - lo) / bins:g}: {count}'
                         '</title></rect>')
    for tick in range(-20, 21, 5):
        x = PAD + (tick - lo) / (hi - lo) * (WIDTH - 2 * PAD)
        parts.append(f'<text x="{x - 6:.1f}" y="{HEIGHT - 8}" font-size="10">{tick}</text>')
    if scores:
        threshold = min(max(scores[0][1], lo), hi)
        x = PAD + (threshold - lo) / (hi - lo) * (WIDTH - 2 * PAD)
        parts.append(f'<line x1="{x:.1f}" y1="{PAD - 10}" x2="{x:.1f}" y2="{HEIGHT - PAD}" '
                     f'stroke="{COLOURS["spam"]}" stroke-dasharray="4 3" stroke-width="2"/>'
                     f'<text x="{x + 4:.1f}" y="{PAD - 2}" font-size="10">threshold '
                     f'{scores[0][1]:.2f}</text>')
    parts.append(f'<text x="2" y="{PAD - 6}" font-size="10">{top}</text>')
    return "".join(parts) + "</svg>"


def _open(title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title>'
            f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
            'stroke="#999"/>')


def _legend() -> str:
    out = []
    for i, label in enumerate(("spam", "unsure", "ham")):
        x = WIDTH - PAD - 180 + i * 60
        out.append(f'<rect x="{x}" y="4" width="10" height="10" fill="{COLOURS[label]}"/>'
                   f'<text x="{x + 14}" y="13" font-size="10">{label}</text>')
    return "".join(out)
