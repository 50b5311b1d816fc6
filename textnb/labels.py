"""The two labels, and the check that labelled mail holds both.

Label codes are positions in LABELS: 0 ham, 1 spam (the rows of every count array,
the ledger's codes, PMML's class order).
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import EmptyTrainingSetError

LABELS = ("ham", "spam")
LABEL_CODES = {label: code for code, label in enumerate(LABELS)}


def require_both_classes(n_learned: Mapping[str, int]) -> None:
    """EmptyTrainingSetError naming the missing class(es) when a count is 0.

    n_learned (Mapping[str, int]): messages learned per label, as SpamFilter.n_learned.
    """
    missing = [k for k, v in n_learned.items() if v == 0]
    if missing:
        raise EmptyTrainingSetError(
            f"no {' or '.join(missing)} messages in the training set; textnb needs "
            "examples of both spam and ham (give --spam and --ham sources, or an index)")
