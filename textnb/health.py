"""Training health: does a model have enough mail of each class to be trusted?

A Bayes filter with too little or one-sided training does not fail loudly: it gives
confident verdicts that are often wrong. rspamd and SpamAssassin refuse to use a
Bayes database before 200 messages of each class. textnb says so instead (``info``,
``classify``, the scorer's PING) and, with per-user models, scores a user whose own
model is not healthy with the shared model (textnb.users).

The limits come from bench/learning_curve.py (md5 split, test = 1 in 5; 5 random
training draws per row; error % of the default threshold ln λ, and (1-AUC)%):

    per class     SpamAssassin           Enron 1-3
                  error%   (1-AUC)%      error%   (1-AUC)%
       25          7.93     2.925         11.07    4.740
       50          7.43     1.755          5.94    1.839
      100          4.04     0.468          3.91    0.888
      200          2.55     0.245          2.65    0.403
      400          1.75     0.126          1.96    0.229
      800          1.15     0.066          1.36    0.121

Below 200 a class's errors are 1.5-4.5 times those at 200 on both corpora, and the
spread between draws is widest (SpamAssassin (1-AUC)% 0.29-0.71 at 100, 0.16-0.45 at
200); from 200 on each doubling gains a steady third. Hence 200, the same as rspamd's
and SpamAssassin's. Imbalance, 400 of one class against 400/r of the other:

    r             1:1    1:4    1:10   1:20   1:40
    SpamAssassin  1.80   3.28   5.74   8.69   17.6   error%
    Enron 1-3     1.94   3.66   7.83   16.4   24.5

Up to 1:4 the loss is that of the short class's size (balanced 100 + 100 scores
4.04 / 3.91); from 1:10 imbalance itself costs on Enron (1:10 is 7.83 against 5.94
for balanced 50 + 50; 1:20 16.4 against 11.07 for 25 + 25). Hence a warning when one
class has 10 times the other's messages or more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MIN_PER_CLASS", "MAX_IMBALANCE", "Health", "training_health"]

MIN_PER_CLASS = 200
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
