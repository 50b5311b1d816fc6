"""Numeric message features beside the tokens, and the models that score them.

``model.numeric_model = "gaussian"`` or ``"kde"`` adds, to the tokens' log-odds, the
log-likelihood ratio of a few numbers measured on each message, each modelled per
class by a Gaussian (:mod:`textnb.models.gaussian`) or a kernel density with leave-one-out
bandwidth (:mod:`textnb.models.kde`):

    log_size          ln(1 + bytes of the raw message)
    log_links         ln(1 + HTML link/src targets + http://, https://, www. in the text)
    log_recipients    ln(1 + addresses in To: and Cc:)
    capitals_share    upper-case letters / letters of the body text (0 without letters)
    log_received      ln(1 + Received: fields), the relay hops
    log_attachments   ln(1 + non-text parts)
    html_share        characters of text/html parts / characters of all text parts

Counts and sizes are heavy-tailed (a 300 kB message beside a 2 kB one), so they enter
on a log scale: a Gaussian on bytes would put most of its mass below zero.

They are off by default: on the SpamAssassin split they do not help (the measurement
is in ``configs/default.toml`` and ``bench/numeric_features.py``). The numbers need
the raw message, so only ``learn``/``fit`` and the raw-message scorers (``log_odds``,
``classify``, ``explain``) use them; token-level paths (``learn_tokens``,
``log_odds_tokens``, ``add_counts``) leave them out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import numpy as np

from ..mail.parse import MailLimits, ParsedEmail, parse_message

__all__ = ["FEATURES", "message_features", "feature_matrix", "make_numeric_model"]

FEATURES = ("log_size", "log_links", "log_recipients", "capitals_share", "log_received",
            "log_attachments", "html_share")
KINDS = ("none", "gaussian", "kde")
# The PMML threshold of an exported model: both engines floor densities at it, so
# textnb does the same (a density below it is 37 σ out on a Gaussian).
MIN_DENSITY = 1e-300
_TEXT_LINK = re.compile(r"https?://|\bwww\.", re.IGNORECASE)


def message_features(raw: bytes, email: ParsedEmail) -> list[float]:
    """The FEATURES of one message, in order."""
    texts = [p.text for p in email.parts]
    body = "".join(texts)
    letters = sum(1 for ch in body if ch.isalpha())
    upper = sum(1 for ch in body if ch.isupper())
    html = sum(len(p.text) for p in email.parts if p.content_type == "text/html")
    recipients = sum(v.count("@") for name in ("to", "cc") for v in email.header(name))
    links = len(email.urls) + sum(len(_TEXT_LINK.findall(t)) for t in texts)
    return [
        math.log1p(len(raw)),
        math.log1p(links),
        math.log1p(recipients),
        upper / letters if letters else 0.0,
        math.log1p(len(email.header("received"))),
        math.log1p(len(email.attachments)),
        html / len(body) if body else 0.0,
    ]


def feature_matrix(raws: Iterable[bytes], limits: MailLimits = MailLimits()) -> np.ndarray:
    """FEATURES of each raw message: an ndarray of shape (n_docs, len(FEATURES))."""
    rows = [message_features(raw, parse_message(raw, limits)) for raw in raws]
    return np.array(rows, dtype=np.float64).reshape(-1, len(FEATURES))


def make_numeric_model(kind: str):
    """The numeric-feature model for ``model.numeric_model`` (None for "none")."""
    if kind == "none":
        return None
    if kind == "gaussian":
        from .gaussian import GaussianNB

        return GaussianNB(min_density=MIN_DENSITY)
    if kind == "kde":
        from .kde import KernelDensityNB

        return KernelDensityNB(min_density=MIN_DENSITY)
    raise ValueError(f"unknown numeric model {kind!r}; use one of {', '.join(KINDS)}")


def to_arrays(model) -> dict[str, np.ndarray]:
    """The model's state as named arrays (model files store them as numeric_<name>.npy)."""
    return model.to_arrays()


def from_arrays(kind: str, arrays: dict):
    model = make_numeric_model(kind)
    return type(model).from_arrays(arrays, min_density=MIN_DENSITY)


def export_parameters(model) -> dict:
    """Per-class means and variances for PMML's GaussianDistribution (Gaussian only)."""
    from ..errors import PMMLError

    if model.kind != "gaussian":
        raise PMMLError(f"numeric_model={model.kind!r} cannot be exported: PMML's "
                        "NaiveBayesModel has Gaussian, Poisson and uniform distributions but "
                        "no kernel density; retrain with model.numeric_model = \"gaussian\"")
    model._check_fitted()
    return {"kind": "gaussian", "features": list(FEATURES), "mean": model.mean_.tolist(),
            "var": model.var_.tolist()}


def to_json(model) -> dict:
    """The state of a Gaussian model as JSON-able lists (textnb's PMML Extension)."""
    return {"kind": model.kind, **{k: v.tolist() for k, v in model.to_arrays().items()}}


def from_json(data: dict):
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in data.items()
              if k not in ("kind", "fields")}
    return from_arrays(data["kind"], arrays)
