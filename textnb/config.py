"""Configuration: frozen dataclasses read once at the CLI boundary.

``configs/default.toml`` documents every value and the experiment behind it;
the defaults here must stay equal to that file (a test checks). Nothing in the
package reads configuration at import time: a ``FilterConfig`` is passed down.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .mail.parse import MailLimits


@dataclass(frozen=True)
class TokenizerConfig:
    lowercase: bool = True
    min_token_length: int = 1
    max_token_length: int = 40
    header_mode: str = "all"  # configs/default.toml: chosen by CV and chronological validation
    headers: tuple[str, ...] = (
        "subject", "from", "to", "cc", "reply-to", "sender", "return-path",
        "received", "content-type", "x-mailer", "user-agent", "message-id",
        "list-id", "organization",
    )
    max_header_tokens: int = 200
    received_subnets: bool = True
    url_parts: bool = True
    number_shapes: bool = True
    bigrams: bool = True
    max_tokens: int = 50_000


# The settings that bound the work one message may cost (docs/hostile-mail.md), and how
# far a configuration or a model may lift them. A model carries its settings, so without
# a ceiling an imported model could lift them (mail.max_bytes = 10**12) for everyone who
# scores with it. Each default comes with its measured cost (configs/default.toml); ten
# times it keeps the worst message within seconds.
HOSTILE_MAIL_BOUNDS = (("mail", "max_bytes"), ("mail", "max_parts"), ("mail", "max_depth"),
                       ("mail", "max_headers"), ("mail", "max_html_chars"),
                       ("tokenizer", "max_tokens"), ("tokenizer", "max_header_tokens"))
BOUND_CEILING = 10


@dataclass(frozen=True)
class FeatureConfig:
    features: str = "binary"
    min_df: int = 1
    max_features: int = 0


@dataclass(frozen=True)
class ModelConfig:
    event_model: str = "multinomial"
    alpha: float = 0.1
    # The route's own pseudo-count (header fields other than Subject); None: alpha, what a
    # model file saved before the setting existed reads as (configs/default.toml says why
    # 0.03). A number or nothing, so its kind is given apart from its default.
    route_alpha: float | None = field(default=0.03, metadata={"kind": float, "or_none": True})
    fit_prior: bool = True
    class_prior: tuple[float, float] | None = None
    max_discriminators: int = 16
    max_pair_discriminators: int = 6
    evidence: str = "each-side"
    header_places: int = 2
    header_discriminators: int = 4
    clues_per_header_field: int = 2
    tile_word_pairs: bool = False
    min_strength: float = 0.0
    combine: str = "sum"
    numeric_model: str = "none"


@dataclass(frozen=True)
class DecisionConfig:
    cost_ratio: float = 1.0
    unsure_band: float = 0.0
    review_cost: float = 0.0


TRAINING_REGIMES = ("all", "error", "thick")


@dataclass(frozen=True)
class TrainingConfig:
    """Which labelled messages ``train`` and ``retrain`` learn, in the order given
    (textnb.modelfile.lifecycle): ``thick`` those the model of the messages before gets
    wrong or right by less than ``margin`` log-odds beyond the threshold, ``all`` every
    one, ``error`` the wrong ones."""

    regime: str = "thick"  # configs/default.toml [training]: the experiments behind both
    margin: float = 40.0


@dataclass(frozen=True)
class FilterConfig:
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    decision: DecisionConfig = field(default_factory=DecisionConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    # The [mail] section: the parser's bounds per message (textnb.mail.parse.MailLimits).
    mail: MailLimits = field(default_factory=MailLimits)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def learning_every_message(self) -> "FilterConfig":
        """These settings with ``training.regime = "all"``: where there is no order to
        learn in (two piles), or no one process to learn in (Dask, a shared store)."""
        return replace(self, training=replace(self.training, regime="all"))

    def validate(self) -> "FilterConfig":
        """Check every value; raise ConfigError naming the value and the fix."""
        t, f, m, d = self.tokenizer, self.features, self.model, self.decision
        _check(t.header_mode in ("all", "selected"), "tokenizer.header_mode", t.header_mode,
               "use 'all' or 'selected'")
        _check(t.max_token_length >= t.min_token_length >= 1, "tokenizer.max_token_length",
               t.max_token_length, "use 1 <= min_token_length <= max_token_length")
        _check(t.max_tokens > 0, "tokenizer.max_tokens", t.max_tokens, "use a positive number")
        _check(f.features in ("tf", "binary"), "features.features", f.features,
               "use 'tf' (term frequency) or 'binary'")
        _check(f.min_df >= 1, "features.min_df", f.min_df, "use 1 (no pruning) or more")
        _check(f.max_features >= 0, "features.max_features", f.max_features,
               "use 0 (no limit) or a positive number")
        # The registry of event models (imported here, not at the top: configs are read
        # where no model is built, and naive_bayes brings the evidence selection with it).
        from .models.naive_bayes import EVENT_MODELS, event_model_names

        _check(m.event_model in EVENT_MODELS, "model.event_model", m.event_model,
               f"use {event_model_names()}")
        _check(m.alpha > 0, "model.alpha", m.alpha,
               "use alpha > 0 (1 is Laplace smoothing, smaller is Lidstone)")
        _check(m.max_discriminators >= 0, "model.max_discriminators", m.max_discriminators,
               "use 0 (all tokens) or a positive number")
        _check(m.max_pair_discriminators >= 0, "model.max_pair_discriminators",
               m.max_pair_discriminators,
               "use 0 (word pairs never count) or a positive number")
        _check(m.evidence in ("strongest", "each-side"), "model.evidence", m.evidence,
               "use 'strongest' (the k strongest clues) or 'each-side' (k/2 spam clues and "
               "k/2 ham clues)")
        _check(isinstance(m.header_places, int) and m.header_places >= 0, "model.header_places",
               m.header_places, "use 0 (header clues compete with the rest) or a whole "
               "number of places a side")
        _check(isinstance(m.header_discriminators, int) and m.header_discriminators >= 0,
               "model.header_discriminators", m.header_discriminators,
               "use 0 (header clues share the max_discriminators places with the text) or a "
               "whole number of places a side for them, apart from the text's")
        _check(isinstance(m.clues_per_header_field, int) and m.clues_per_header_field >= 0,
               "model.clues_per_header_field", m.clues_per_header_field,
               "use 0 (every token of a header field may count) or a whole number of clues "
               "one field may give each side")
        _check(isinstance(m.tile_word_pairs, bool), "model.tile_word_pairs", m.tile_word_pairs,
               "use true (a word pair and its own words never both count) or false")
        _check(m.min_strength >= 0 and math.isfinite(m.min_strength), "model.min_strength",
               m.min_strength, "use 0 (every token can be a clue) or a positive |log-likelihood "
               "ratio| a clue must exceed")
        _check(m.combine in ("sum", "chi-square"), "model.combine", m.combine,
               "use 'sum' (naive Bayes) or 'chi-square' (Robinson-Fisher combining)")
        _check(m.numeric_model in ("none", "gaussian", "kde"), "model.numeric_model",
               m.numeric_model, "use 'none', 'gaussian' or 'kde'")
        if m.class_prior is not None:
            ok = len(m.class_prior) == 2 and all(p > 0 for p in m.class_prior)
            ok = ok and abs(sum(m.class_prior) - 1) < 1e-9
            _check(ok, "model.class_prior", m.class_prior,
                   "give two positive numbers [p_ham, p_spam] that sum to 1")
        _check(math.isfinite(m.alpha), "model.alpha", m.alpha, "use a finite alpha, e.g. 0.1")
        if m.route_alpha is not None:
            _check(m.route_alpha > 0 and math.isfinite(m.route_alpha), "model.route_alpha",
                   m.route_alpha, "use a finite route_alpha > 0 (the default 0.03), or "
                   "model.alpha's value for the route's tokens to take it")
        _check(d.cost_ratio > 0 and math.isfinite(d.cost_ratio), "decision.cost_ratio",
               d.cost_ratio,
               "use a positive ratio: cost of losing a ham / cost of letting a spam through")
        _check(d.unsure_band >= 0, "decision.unsure_band", d.unsure_band,
               "use 0 (two-way decision) or a positive log-odds margin")
        _check(d.review_cost >= 0 and math.isfinite(d.review_cost), "decision.review_cost",
               d.review_cost, "use 0 (two-way decision) or the cost of a look at one "
               "message in units of a spam let through, e.g. 0.1")
        _check(not (d.review_cost > 0 and d.unsure_band > 0), "decision.review_cost",
               d.review_cost, "give decision.unsure_band or decision.review_cost, not both "
               "(two rules for 'unsure')")
        _check(self.training.regime in TRAINING_REGIMES, "training.regime",
               self.training.regime, "use 'thick' (learn what the model gets wrong or right "
               "by less than training.margin), 'all' (every message) or 'error'")
        _check(self.training.margin >= 0 and math.isfinite(self.training.margin),
               "training.margin", self.training.margin,
               "use a log-odds margin >= 0 beyond the threshold (the default 40)")
        _check(self.mail.html_renderer in ("lexbor", "stdlib"), "mail.html_renderer",
               self.mail.html_renderer, "use 'lexbor' (selectolax's C parser) or 'stdlib' "
               "(Python's html.parser, what models saved before the setting use)")
        for bound in fields(MailLimits):
            if bound.name == "html_renderer":
                continue
            value = getattr(self.mail, bound.name)
            _check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                   f"mail.{bound.name}", value,
                   f"use a whole number >= 1 (default {bound.default:_}); a bound cannot be off, "
                   "since hostile mail is what it bounds")
        for section, key in HOSTILE_MAIL_BOUNDS:
            part = getattr(self, section)
            default = next(f.default for f in fields(part) if f.name == key)
            value = getattr(part, key)
            _check(not isinstance(value, (int, float)) or value <= BOUND_CEILING * default,
                   f"{section}.{key}", value,
                   f"use at most {BOUND_CEILING * default:_} ({BOUND_CEILING} times the default, "
                   f"{default:_}): the bounds on hostile mail cannot be lifted further")
        return self


def _typed(name: str, value: Any, setting: dataclasses.Field) -> Any:
    """``value`` checked against the kind of its setting: its default's, unless the field
    names one (``metadata={"kind": float, "or_none": True}``: a number or nothing); lists
    become tuples."""
    if isinstance(value, list):
        value = tuple(value)
    kinds = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    default = setting.default
    kind = setting.metadata.get("kind", type(default))
    if kind is float:  # a number (or nothing, where the field says so: route_alpha)
        ok = ((isinstance(value, (int, float)) and not isinstance(value, bool))
              or (value is None and setting.metadata.get("or_none", False)))
        wanted = kinds[float]
    elif default is None or kind is tuple:  # class_prior, headers: lists (or nothing)
        ok = value is None or isinstance(value, tuple)
        wanted = "a list"
    else:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        wanted = kinds.get(kind, kind.__name__)
    if not ok:
        raise ConfigError(f"{name}={value!r} is not allowed; give {wanted} "
                          f"(the default is {default!r})")
    return value


def _check(ok: bool, name: str, value: Any, fix: str) -> None:
    if not ok:
        raise ConfigError(f"{name}={value!r} is not allowed; {fix}")


_SECTIONS = {
    "tokenizer": TokenizerConfig,
    "features": FeatureConfig,
    "model": ModelConfig,
    "decision": DecisionConfig,
    "training": TrainingConfig,
    "mail": MailLimits,
}


def config_from_dict(data: dict[str, Any]) -> FilterConfig:
    """Build a FilterConfig from nested dicts; unknown keys are errors."""
    sections = {}
    for name, section_data in data.items():
        if name not in _SECTIONS:
            raise ConfigError(
                f"unknown config section [{name}]; known sections: {', '.join(_SECTIONS)}")
        cls = _SECTIONS[name]
        if not isinstance(section_data, dict):
            raise ConfigError(f"config section [{name}] must be a table of settings, not "
                              f"{section_data!r}; write it as [{name}] followed by key = value lines")
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in section_data.items():
            if key not in known:
                raise ConfigError(
                    f"unknown config key {name}.{key}; known keys: {', '.join(known)}")
            kwargs[key] = _typed(f"{name}.{key}", value, known[key])
        sections[name] = cls(**kwargs)
    return FilterConfig(**sections)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None
                ) -> FilterConfig:
    """Read a TOML config (defaults when ``path`` is None) and apply dotted overrides.

    overrides: {"model.alpha": 0.5, ...}; values already typed (the CLI parses them).
    """
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: '{path}'; check the --config path") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file '{path}' is not valid TOML: {exc}") from None
    try:
        config = config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"config file '{path}': {exc}") from None
    return apply_overrides(config, overrides or {}).validate()


def apply_overrides(config: FilterConfig, overrides: dict[str, Any]) -> FilterConfig:
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        if section not in _SECTIONS:
            raise ConfigError(f"unknown setting '{dotted}'; sections: {', '.join(_SECTIONS)}")
        known = {f.name: f for f in fields(_SECTIONS[section])}
        if key not in known:
            raise ConfigError(f"unknown setting '{dotted}'; known keys of [{section}]: "
                              f"{', '.join(known)}")
        value = _typed(dotted, value, known[key])
        config = replace(config, **{section: replace(getattr(config, section), **{key: value})})
    return config


def parse_override_value(text: str) -> Any:
    """Parse a command-line override as JSON, falling back to the plain string (as spaCy does)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
