"""Plain-text tables for `evaluate` and `tune`: the field's figures as people read them."""

from __future__ import annotations

import math


def _num(x: float, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:,.{digits}f}"


def cost_rows(rows: list[dict], extra: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """One line per λ: threshold, FP, FN, hm%, sm%, cost, WAcc%, TCR, then ``extra``
    columns given as (heading, key)."""
    head = (f"{'λ':>6} {'threshold':>10} {'FP':>5} {'FN':>5} {'hm%':>6} {'sm%':>6} "
            f"{'cost':>7} {'WAcc%':>7} {'TCR':>7}")
    head += "".join(f" {title:>{max(len(title), 8)}}" for title, _ in extra)
    lines = [head]
    for r in rows:
        line = (f"{r['cost_ratio']:>6g} {_num(r['threshold']):>10} {r['fp']:>5} {r['fn']:>5} "
                f"{r['hm_pct']:>6.2f} {r['sm_pct']:>6.2f} {r['cost']:>7g} "
                f"{100 * r['wacc']:>7.2f} {_num(r['tcr'], 1):>7}")
        line += "".join(f" {r[key]:>{max(len(title), 8)}g}" for title, key in extra)
        lines.append(line)
    return lines


def confusion_lines(counts: dict) -> list[str]:
    """The 2x2 confusion matrix, truth in rows."""
    return [
        f"{'':>12} {'called spam':>12} {'called ham':>12}",
        f"{'spam':>12} {counts['tp']:>12,} {counts['fn']:>12,}",
        f"{'ham':>12} {counts['fp']:>12,} {counts['tn']:>12,}",
    ]
