"""Training health: does a model have enough mail of each class to be trusted?

A Bayes filter with too little or one-sided training does not fail loudly: it gives
confident verdicts that are often wrong. rspamd and SpamAssassin refuse to use a
Bayes database before 200 messages of each class. textnb says so instead (``info``,
``classify``, the scorer's and the milter's start-up, the scorer's PING) and scores
anyway: a new installation still filters. With per-user models a user's model starts
as the shared model's counts (textnb.delivery.users), so a user's first few learned messages
never make a model of their own that is this thin.

The limits come from bench/learning_curve.py's curves on SpamAssassin and Enron 1-3;
the tables and the reasoning are in docs/learning.md#training-health, and the gist
beside each constant below.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MIN_PER_CLASS", "MAX_IMBALANCE", "Health", "training_health"]

# 200 learned messages of each class: below that, the default threshold's error rate is
# 1.5 to 4 times the rate at 200 on both corpora, and from 200 on each doubling removes
# about a third of the errors (bench/learning_curve.py: md5 split, 5 random draws per
# size; SpamAssassin 4.27% at 100 + 100, 2.69% at 200 + 200, 1.77% at 400 + 400).
MIN_PER_CLASS = 200
# 10 to 1: on Enron 1-3, 400 + 40 errs 7.83% against 5.94% for a balanced 50 + 50, so
# imbalance itself costs from there on; at 1:4 only the short class's size does.
MAX_IMBALANCE = 10.0


@dataclass(frozen=True)
class Health:
    """ok (bool): enough of each class and not far out of balance; problems: one
    sentence each, naming the counts and the fix."""

    ok: bool
    problems: list[str] = field(default_factory=list)
    spam: int = 0
    ham: int = 0

    def to_dict(self) -> dict:
        return {"ok": self.ok, "problems": list(self.problems), "min_per_class": MIN_PER_CLASS,
                "max_imbalance": MAX_IMBALANCE}


def training_health(n_learned: dict, min_per_class: int = MIN_PER_CLASS,
                    max_imbalance: float = MAX_IMBALANCE) -> Health:
    """The health of a model that has learned ``n_learned`` ({'spam': n, 'ham': n})."""
    spam, ham = int(n_learned.get("spam", 0)), int(n_learned.get("ham", 0))
    problems = []
    for label, n in (("spam", spam), ("ham", ham)):
        if n < min_per_class:
            problems.append(f"only {n} {label} messages learned (fewer than {min_per_class}): "
                            f"verdicts are unreliable; train on more {label}")
    low, high = sorted((spam, ham))
    if low and high / low >= max_imbalance:
        short = "spam" if spam < ham else "ham"
        problems.append(f"classes out of balance ({spam} spam, {ham} ham: {high / low:.0f} to 1): "
                        f"verdicts lean away from {short}; train on more {short}")
    return Health(not problems, problems, spam, ham)
