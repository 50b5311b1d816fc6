"""Configuration: the shipped defaults file, overrides and validation."""

import pytest

from textnb.config import FilterConfig, config_from_dict, load_config, parse_override_value
from textnb.errors import ConfigError

from conftest import PROJECT


def test_default_toml_equals_builtin_defaults():
    assert load_config(PROJECT / "configs" / "default.toml") == FilterConfig()


def test_dotted_overrides():
    cfg = load_config(None, {"model.alpha": 0.5, "features.features": "tf"})
    assert cfg.model.alpha == 0.5 and cfg.features.features == "tf"


def test_route_alpha_is_a_number_or_unset(tmp_path):
    assert FilterConfig().model.route_alpha == 0.03
    # unset, as a model file saved before the setting existed reads: the route takes alpha
    assert config_from_dict({"model": {"route_alpha": None}}).model.route_alpha is None
    assert load_config(None, {"model.route_alpha": 0.03}).model.route_alpha == 0.03
    path = tmp_path / "route.toml"
    path.write_text("[model]\nroute_alpha = 0.03\n")
    assert load_config(path).model.route_alpha == 0.03


@pytest.mark.parametrize("overrides,message", [
    ({"model.alpha": 0}, "model.alpha=0 is not allowed; use alpha > 0"),
    ({"model.alpha": -1}, "model.alpha=-1"),
    ({"model.event_model": "gaussian"}, "use 'multinomial' or 'bernoulli'"),
    ({"features.features": "tfidf"}, "use 'tf'"),
    ({"decision.cost_ratio": 0}, "decision.cost_ratio=0"),
    ({"features.min_df": 0}, "features.min_df=0"),
    ({"model.class_prior": [0.5, 0.6]}, "sum to 1"),
    ({"model.nope": 1}, "unknown setting 'model.nope'"),
    ({"model.route_alpha": 0}, "model.route_alpha=0 is not allowed; use a finite route_alpha > 0"),
    ({"model.route_alpha": -0.5}, "model.route_alpha=-0.5 is not allowed; use a finite"),
    ({"model.route_alpha": "low"}, "model.route_alpha='low' is not allowed; give a number"),
])
def test_bad_values_are_named_with_a_fix(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, overrides)


def test_unknown_keys_in_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[model]\nalfa = 0.5\n")
    with pytest.raises(ConfigError, match="unknown config key model.alfa"):
        load_config(path)
    path.write_text("[modle]\n")
    with pytest.raises(ConfigError, match=r"unknown config section \[modle\]"):
        load_config(path)
    path.write_text("[model\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml")


def test_override_values_parse_as_json_or_text():
    assert parse_override_value("0.5") == 0.5
    assert parse_override_value("true") is True
    assert parse_override_value("bernoulli") == "bernoulli"


def test_every_shipped_config_loads():
    for path in sorted((PROJECT / "configs").glob("*.toml")):
        load_config(path)
    assert load_config(PROJECT / "configs" / "short-texts.toml").model.event_model == "bernoulli"
