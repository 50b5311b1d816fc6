"""More places for the ham side: 8 spam clues and 8, 12, 16 or 24 ham clues.

    python -m bench.ham_places [--json docs/results/ham-places.json]

A list's advertisement has hundreds of strong spam clues and a ham side of a few dozen
list tokens, of which the default selection counts 8. This gives the ham side more
places while the spam side keeps 8 (header places as the default: 2 a side), by
replacing the selection's split of its places (``textnb.models.evidence.split_places``)
for the run: ``model.max_discriminators`` = 20, 24, 32 mean 8 spam places and 12, 16,
24 ham places. Each is run on the six validation cells the defaults are chosen on
(bench/select_defaults.py) and on the conflicting-labels test, its test split and its
validation split (bench/conflicting_labels.py, textnb only).
docs/conflicting-evidence.md#measured-not-built-other-ways-to-add-up-two-sided-evidence
gives the results.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.common import require_corpora, write_json
from textnb.models import evidence

HAM_PLACES = {20: 12, 24: 16, 32: 24}  # max_discriminators -> the ham side's places


def split_places(k: int, max_limited: int | None):
    """The default split, except that the totals of HAM_PLACES give 8 spam places."""
    spam_cap = None if max_limited is None else max_limited - max_limited // 2
    ham_cap = None if max_limited is None else max_limited // 2
    if k in HAM_PLACES:
        return (k - HAM_PLACES[k], spam_cap), (HAM_PLACES[k], ham_cap)
    return (k - k // 2, spam_cap), (k // 2, ham_cap)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    require_corpora()
    evidence.split_places = split_places  # every caller looks it up in the module
    from bench import conflicting_labels, select_defaults

    out = {"ham_places": {f"model.max_discriminators={k}": f"8 spam + {h} ham places"
                          for k, h in HAM_PLACES.items()}}
    with tempfile.TemporaryDirectory(prefix="textnb-ham-places-") as tmp:
        cells = Path(tmp) / "cells.json"
        select_defaults.main(["--variant", ""] + [
            a for k in HAM_PLACES for a in ("--variant", f"model.max_discriminators={k}")]
            + ["--json", str(cells)])
        out["validation_cells"] = json.loads(cells.read_text())
        variants = [a for k, h in HAM_PLACES.items()
                    for a in ("--variant", f"ham{h}=model.max_discriminators={k}")]
        for split in ("chronological", "chronological-validation"):
            test = Path(tmp) / f"{split}.json"
            conflicting_labels.main(["--no-peer", "--split", split, *variants, "--json", str(test)])
            out[f"conflicting_labels_{split}"] = json.loads(test.read_text())
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
