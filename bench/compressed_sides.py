"""Each side's evidence compressed, on the conflicting-labels test.

    python -m bench.compressed_sides [--json docs/results/compressed-sides.json]

Naive Bayes adds up a message's clues as if they were independent; an advertisement's
hundreds of spam clues come from one template, so their sum overstates. A concave map of
each side's total, a ln(1 + S/a) - a ln(1 + H/a) (smaller a: stronger compression, the
way Fisher's chi-square saturates each side), pulls a message with strong evidence both
ways toward the middle. Scored on the conflicting-labels test (bench/conflicting_labels.py:
one list's advertisements spam in the past, ham in the future; SpamAssassin's
chronological split) with the default selection (8 + 8 clues) and with every clue, as
bogofilter counts them. docs/conflicting-evidence.md#measured-not-built-other-ways-to-add-up-two-sided-evidence
gives the results.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench.common import require_corpora, write_json
from bench.conflict_limits import chronological_matrix
from bench.conflicting_labels import LISTS, conflicting, figures
from textnb.config import load_config

COMPRESSION = (None, 80, 40, 20, 10, 5)  # None: the sum
PLACES = {"8 + 8 (default)": 16, "every clue": 0}


def compressed(S, H, a):
    if a is None:
        return S - H
    return a * np.log1p(np.maximum(S, 0) / a) - a * np.log1p(H / a)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    require_corpora()
    cfg = load_config(None, {})
    part, ids, original, matrix = chronological_matrix(cfg)
    results = {}
    for changed in LISTS:
        y, moved = conflicting(ids, part, original, changed)
        past, future = np.flatnonzero(part == "past"), np.flatnonzero(part == "test")
        if not moved[future].any():
            continue
        model = matrix.fit(y, past)
        for name, places in PLACES.items():
            S, H = matrix.sides(model, future, places)
            for a in COMPRESSION:
                f = figures(y[future], compressed(S, H, a), moved[future])
                results.setdefault(changed, {}).setdefault(name, {})[
                    "sum" if a is None else f"a={a}"] = f
                print(f"{changed} {name} {'sum' if a is None else f'a={a}'}: worst "
                      f"{f['worst_spams_outscored_pct']:.1f}% median "
                      f"{f['median_spams_outscored_pct']:.1f}%, (1-AUC)% "
                      f"{f['one_minus_auc_pct']:.3f}, sm%@hm0.1% {f['sm_pct_at_hm_0.1pct']:.2f}",
                      flush=True)
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
