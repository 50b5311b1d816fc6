"""spaCy imported without its command line (textnb.text.spacy_import)."""

import subprocess
import sys

# In a fresh interpreter: the test process may have imported spaCy already.
_CHECK = """
import sys
from textnb.text.spacy_import import import_spacy
from textnb.text.tokenize import make_spacy_tokenizer
spacy = import_spacy()
words = [w.text for w in make_spacy_tokenizer()("Hello, (world)! a@b.com")]
without_cli = not any(m.startswith(("spacy.cli", "weasel", "httpx")) for m in sys.modules)
import spacy.cli.info                           # the real one, when asked for
print(words, without_cli, sys.modules["spacy.cli.info"].__file__ is not None,
      isinstance(spacy.info(), dict), import_spacy() is spacy)
"""


def test_spacy_is_imported_without_its_cli_which_loads_when_asked_for():
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout
    assert out.split("] ")[1].split() == ["True"] * 4
    assert out.startswith("['Hello', ',', '(', 'world', ')', '!', 'a@b.com']")


def test_a_spacy_that_needs_its_cli_is_imported_as_usual(monkeypatch):
    """When spaCy's package fails with the stand-ins in place, the usual import runs."""
    from textnb.text import spacy_import

    calls = []

    def import_module(name):
        calls.append(sorted(m for m in sys.modules if m.startswith("spacy.cli")))
        if len(calls) == 1:
            raise ImportError("cannot import name 'app' from 'spacy.cli'")
        return "spacy"

    for name in ("spacy", "spacy.cli", "spacy.cli.info"):  # put back after the test
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(spacy_import.importlib, "import_module", import_module)
    assert spacy_import.import_spacy() == "spacy"
    assert calls == [["spacy.cli", "spacy.cli.info"], []]  # the stand-ins, then none
    assert "spacy.cli" not in sys.modules and "spacy.cli.info" not in sys.modules
