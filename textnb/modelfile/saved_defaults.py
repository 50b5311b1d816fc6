"""Config migration: a saved config read with the value it was scored with for every key
added since it was saved."""

from __future__ import annotations


# Settings added after model files were first written, with the value every older file
# was scored with: a file that lacks the key keeps scoring as it did when it was saved,
# whatever the built-in default has become since.
_SAVED_BEFORE_THE_KEY_EXISTED = {("model", "evidence"): "strongest",
                                  ("model", "header_places"): 0,
                                  ("model", "header_discriminators"): 0,
                                  ("model", "min_strength"): 0.0,
                                  ("model", "combine"): "sum",
                                  ("model", "clues_per_header_field"): 0,
                                  ("model", "tile_word_pairs"): False,
                                  ("model", "route_alpha"): None,  # None: model.alpha
                                  ("mail", "html_renderer"): "stdlib",
                                  # Learned every message it was given.
                                  ("training", "regime"): "all",
                                  ("training", "margin"): 40.0}


def with_saved_defaults(config: dict) -> dict:
    """A saved config (nested dicts) with the value it was scored with filled in for every
    key added since (model files and text dumps both read their settings through it)."""
    config = {name: dict(section) if isinstance(section, dict) else section
              for name, section in config.items()}
    for (section, key), value in _SAVED_BEFORE_THE_KEY_EXISTED.items():
        if section not in config:  # saved before the section existed ([mail], [training])
            config[section] = {}
        if isinstance(config.get(section), dict):
            config[section].setdefault(key, value)
    return config
