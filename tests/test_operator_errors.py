"""Bad operator input, command by command.

Every case checks the same four things: a non-zero exit code (2 for an option value
out of range, via typer; 1 for every other operator error: textnb.cli._util), a
message that names the bad value and says what to do, the existing model file's
bytes unchanged, and no temporary file left beside it.

The second half covers unreadable inputs in batch commands: skipped, counted and
listed on stderr by default (exit 0), the first one fatal with --strict.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.errors import SourceError
from textnb.mail import sources
from textnb.mail.unreadable import collecting
from textnb.modelfile import store

from conftest import EVERY_MESSAGE, SAMPLE

runner = CliRunner()
INDEX_LINES = (SAMPLE / "index").read_text().splitlines()


def _text(result) -> str:
    """All output, with typer's boxes removed and whitespace collapsed (messages wrap)."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _absolute_index(folder: Path, name: str, extra: list[str] = ()) -> Path:
    """The sample index with absolute paths, plus ``extra`` lines."""
    lines = [f"{label} {SAMPLE / rel}" for label, rel in (line.split() for line in INDEX_LINES
                                                          if line)]
    path = folder / name
    path.write_text("\n".join(lines + list(extra)) + "\n")
    return path


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("pristine") / "model.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index")])
    assert result.exit_code == 0, result.output
    return path.read_bytes()


@pytest.fixture(scope="module")
def bad(tmp_path_factory, pristine) -> Path:
    """A folder of bad inputs, shared by the matrix (read-only use)."""
    b = tmp_path_factory.mktemp("bad")
    (b / "empty").mkdir()
    (b / "folder").mkdir()
    (b / "unknown.idx").write_text(f"spam {SAMPLE}/spam/001.eml\nmaybe {SAMPLE}/ham/001.eml\n")
    (b / "malformed.idx").write_text(f"spam {SAMPLE}/spam/001.eml\n\n# a comment\nspam\n")
    _absolute_index(b, "missing.idx", [f"ham {b}/nope.eml"])
    _absolute_index(b, "dir.idx", [f"spam {SAMPLE}/spam"])
    (b / "notab.tsv").write_text("spam free money\n")
    (b / "badkey.toml").write_text("[model]\nalfa = 1\n")
    (b / "badvalue.toml").write_text("[model]\nalpha = -1\n")
    (b / "notoml.toml").write_text("[model\n")
    (b / "section.toml").write_text("model = 3\n")
    (b / "strvalue.toml").write_text('[model]\nalpha = "abc"\n')
    return b


@pytest.fixture
def model(tmp_path, pristine) -> Path:
    """A good model alone in its folder: the file every failed command must leave alone."""
    folder = tmp_path / "models"
    folder.mkdir()
    path = folder / "model.tnb"
    path.write_bytes(pristine)
    return path


def check(result, code: int, needles, model: Path, before: str, allowed=()) -> None:
    """Exit code, message, model unchanged, no temporary file."""
    text = _text(result)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"traceback instead of a message: {result.exception!r}"
    assert result.exit_code == code, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"
    assert _sha(model) == before, "the model file changed"
    leftovers = set(os.listdir(model.parent)) - {model.name, model.name + ".lock", *allowed}
    assert not leftovers, f"left behind: {leftovers}"


def _invoke(args, model: Path, bad: Path, needles=(), **kwargs):
    """The command run through typer's runner, {M} (the model), {S} (the sample) and {B}
    (the bad inputs) filled in in its arguments and in the needles."""
    fill = {"M": model, "S": SAMPLE, "B": bad}
    args = [a.format(**fill) for a in args]
    needles = [n.format(**fill) for n in needles]
    return runner.invoke(app, args, **kwargs), needles



# (id, arguments, exit code, strings the message must hold: the value, then the fix)
MATRIX = [
    # -- wrong or missing paths ------------------------------------------------------
    ("classify-no-model", ["classify", "-m", "{B}/none.tnb", "{S}/mbox"], 1,
     ["{B}/none.tnb", "train one first with 'textnb train"]),
    ("info-model-is-a-folder", ["info", "-m", "{B}/folder"], 1,
     ["{B}/folder", "is a directory", "give --model the path of a readable model file"]),
    ("classify-no-source", ["classify", "-m", "{M}", "{B}/none.eml"], 1,
     ["{B}/none.eml", "check the path"]),
    ("explain-no-source", ["explain", "-m", "{M}", "{B}/none.eml"], 1,
     ["{B}/none.eml", "check the path"]),
    ("train-no-index", ["train", "-m", "{M}", "--index", "{B}/none.idx"], 1,
     ["{B}/none.idx", "check the path"]),
    ("train-no-spam-folder", ["train", "-m", "{M}", "--spam", "{B}/none", "--ham", "{S}/ham"], 1,
     ["{B}/none", "check the path"]),
    ("retrain-no-source", ["retrain", "-m", "{M}", "--spam", "{B}/none"], 1,
     ["{B}/none", "check the path"]),
    ("forget-no-source", ["forget", "-m", "{M}", "{B}/none"], 1, ["{B}/none", "check the path"]),
    ("evaluate-no-index", ["evaluate", "-m", "{M}", "--index", "{B}/none.idx"], 1,
     ["{B}/none.idx", "check the path"]),
    ("tune-no-index", ["tune", "-m", "{M}", "--index", "{B}/none.idx"], 1,
     ["{B}/none.idx", "check the path"]),
    ("train-no-config", ["train", "-m", "{M}", "--index", "{S}/index", "--config", "{B}/none.toml"],
     1, ["{B}/none.toml", "check the --config path"]),
    ("export-no-model", ["export", "{B}/out.pmml", "-m", "{B}/none.tnb"], 1,
     ["{B}/none.tnb", "textnb train"]),
    ("import-no-document", ["import", "{B}/none.pmml", "-m", "{M}"], 1,
     ["{B}/none.pmml", "check the path"]),
    ("pmml-score-no-document", ["pmml-score", "{B}/none.pmml", "{B}/none.csv"], 1,
     ["{B}/none.pmml", "check the path"]),
    ("serve-no-model", ["serve", "-m", "{B}/none.tnb", "--socket", "{B}/s.sock"], 1,
     ["{B}/none.tnb", "textnb train"]),
    ("train-no-sources", ["train", "-m", "{M}"], 1, ["no training messages", "pass --spam"]),
    ("retrain-no-sources", ["retrain", "-m", "{M}"], 1, ["no messages to retrain on", "pass --spam"]),
    ("forget-no-sources", ["forget", "-m", "{M}"], 1, ["no messages to forget", "pass the files"]),
    # -- empty and one-class training sets -------------------------------------------
    ("train-empty-spam", ["train", "-m", "{M}", "--spam", "{B}/empty", "--ham", "{S}/ham"], 1,
     ["no spam messages", "give --spam and --ham"]),
    ("train-one-class", ["train", "-m", "{M}", "--spam", "{S}/spam"], 1,
     ["no ham messages", "give --spam and --ham"]),
    ("evaluate-one-class", ["evaluate", "-m", "{M}", "--spam", "{S}/spam"], 1,
     ["no ham messages among the 40 given", "give --spam and --ham"]),
    ("tune-one-class", ["tune", "-m", "{M}", "--write", "--ham", "{S}/ham"], 1,
     ["no spam messages among the 60 given", "both"]),
    # -- index and TSV lines ------------------------------------------------------------
    ("index-unknown-label", ["train", "-m", "{M}", "--index", "{B}/unknown.idx"], 1,
     ["unknown.idx:2", "'maybe'", "use 'spam' or 'ham'"]),
    ("index-malformed-line", ["train", "-m", "{M}", "--index", "{B}/malformed.idx"], 1,
     ["malformed.idx:4", "got 'spam'", "add the label or the path"]),
    ("index-missing-file-strict", ["train", "-m", "{M}", "--strict", "--index", "{B}/missing.idx"],
     1, ["missing.idx:101", "{B}/nope.eml", "fix the line"]),
    ("index-folder-strict", ["train", "-m", "{M}", "--strict", "--index", "{B}/dir.idx"], 1,
     ["dir.idx:101", "(a directory)", "fix the line"]),
    ("evaluate-unknown-label", ["evaluate", "-m", "{M}", "--index", "{B}/unknown.idx"], 1,
     ["'maybe'", "use 'spam' or 'ham'"]),
    ("retrain-unknown-label", ["retrain", "-m", "{M}", "--index", "{B}/unknown.idx"], 1,
     ["'maybe'", "use 'spam' or 'ham'"]),
    ("tsv-no-tab", ["train", "-m", "{M}", "--tsv", "{B}/notab.tsv"], 1,
     ["notab.tsv:1", "no TAB", "expected 'spam<TAB>text'"]),
    # -- configuration values -----------------------------------------------------------
    ("alpha-zero", ["train", "-m", "{M}", "--index", "{S}/index", "--alpha", "0"], 1,
     ["model.alpha=0", "use alpha > 0"]),
    ("set-alpha-zero", ["train", "-m", "{M}", "--index", "{S}/index", "--set", "model.alpha=0"], 1,
     ["model.alpha=0", "use alpha > 0"]),
    ("set-alpha-negative", ["train", "-m", "{M}", "--index", "{S}/index", "--set", "model.alpha=-1"],
     1, ["model.alpha=-1", "use alpha > 0"]),
    ("alpha-nan", ["train", "-m", "{M}", "--index", "{S}/index", "--alpha", "nan"], 1,
     ["model.alpha=nan", "use alpha > 0"]),
    ("set-cost-ratio-zero", ["train", "-m", "{M}", "--index", "{S}/index", "--set",
                             "decision.cost_ratio=0"], 1,
     ["decision.cost_ratio=0", "use a positive ratio"]),
    ("set-min-df-negative", ["train", "-m", "{M}", "--index", "{S}/index", "--set",
                             "features.min_df=-1"], 1, ["features.min_df=-1", "use 1"]),
    ("event-model-unknown", ["train", "-m", "{M}", "--index", "{S}/index", "--event-model",
                             "gaussian"], 1, ["'gaussian'", "use 'multinomial' or 'bernoulli'"]),
    ("set-not-key-value", ["train", "-m", "{M}", "--index", "{S}/index", "--set", "nonsense"], 2,
     ["'nonsense'", "section.key=value"]),
    ("config-unknown-key", ["train", "-m", "{M}", "--index", "{S}/index", "--config",
                            "{B}/badkey.toml"], 1, ["model.alfa", "known keys: event_model, alpha"]),
    ("config-bad-value", ["train", "-m", "{M}", "--index", "{S}/index", "--config",
                          "{B}/badvalue.toml"], 1, ["model.alpha=-1", "use alpha > 0"]),
    ("config-not-toml", ["train", "-m", "{M}", "--index", "{S}/index", "--config",
                         "{B}/notoml.toml"], 1, ["notoml.toml", "not valid TOML", "line 1"]),
    ("set-unknown-key", ["train", "-m", "{M}", "--index", "{S}/index", "--set", "model.alfa=1"],
     1, ["'model.alfa'", "known keys"]),
    ("config-section-not-a-table", ["train", "-m", "{M}", "--index", "{S}/index", "--config",
                                    "{B}/section.toml"], 1, ["model", "section.toml"]),
    ("set-alpha-string", ["train", "-m", "{M}", "--index", "{S}/index", "--set",
                          "model.alpha=abc"], 1, ["model.alpha='abc'", "give a number"]),
    # -- cost ratios and other option values ----------------------------------------------------
    ("classify-cost-zero", ["classify", "-m", "{M}", "-r", "0", "{S}/mbox"], 2,
     ["0.0 must be > 0 and finite", "e.g. 9"]),
    ("classify-cost-negative", ["classify", "-m", "{M}", "-r", "-1", "{S}/mbox"], 2,
     ["-1.0 must be > 0 and finite"]),
    ("classify-cost-nan", ["classify", "-m", "{M}", "-r", "nan", "{S}/mbox"], 2,
     ["nan must be > 0 and finite"]),
    ("classify-cost-inf", ["classify", "-m", "{M}", "-r", "inf", "{S}/mbox"], 2,
     ["inf must be > 0 and finite"]),
    ("evaluate-cost-inf", ["evaluate", "-m", "{M}", "-r", "inf", "--index", "{S}/index"], 2,
     ["inf must be > 0 and finite"]),
    ("tune-cost-zero", ["tune", "-m", "{M}", "-r", "0", "--index", "{S}/index"], 2,
     ["0.0 must be > 0 and finite"]),
    ("explain-cost-negative", ["explain", "-m", "{M}", "-r", "-1", "{S}/mbox"], 2,
     ["-1.0 must be > 0 and finite"]),
    ("explain-top-negative", ["explain", "-m", "{M}", "-k", "-1", "{S}/mbox"], 2,
     ["--top", "greater than or equal to 0"]),  # typer's range message names the option
    ("tune-one-fold", ["tune", "-m", "{M}", "-k", "1", "--index", "{S}/index"], 2,
     ["--folds", "greater than or equal to 2"]),
    ("retrain-regime", ["retrain", "-m", "{M}", "--regime", "bogus", "--spam", "{S}/spam"], 1,
     ["'bogus'", "use one of all, error, thick"]),
    ("retrain-margin", ["retrain", "-m", "{M}", "--regime", "thick", "--margin", "-1", "--spam",
                        "{S}/spam"], 1, ["margin -1.0", "must be >= 0"]),
    ("export-max-features", ["export", "{B}/out.pmml", "-m", "{M}", "--max-features", "-5"], 1,
     ["max_features=-5", "give a positive number"]),
    ("serve-max-bytes", ["serve", "-m", "{M}", "--socket", "{B}/s.sock", "--max-bytes", "0"], 1,
     ["max_bytes=0", "must be > 0"]),
    ("serve-public-address", ["serve", "-m", "{M}", "--tcp", "0.0.0.0:0"], 1,
     ["'0.0.0.0'", "not a loopback address", "--allow-remote"]),
    ("serve-bad-tcp", ["serve", "-m", "{M}", "--tcp", "abc"], 2, ["'abc' is not [HOST:]PORT"]),
    ("merge-no-input", ["merge", "{M}", "{B}/none.tnb", "-m", "{B}/out.tnb"], 1,
     ["{B}/none.tnb", "train one first with 'textnb train"]),
    ("merge-one-input", ["merge", "{M}", "-m", "{B}/out.tnb"], 2,
     ["give two or more models to merge, got 1"]),
    ("milter-bad-socket", ["milter", "-m", "{M}", "--socket", "bogus:1"], 1,
     ["'bogus:1' is not a milter socket", "inet:PORT@HOST"]),
    ("milter-public-address", ["milter", "-m", "{M}", "--socket", "inet:1@0.0.0.0"], 1,
     ["'0.0.0.0'", "not a loopback address", "--allow-remote"]),
    ("serve-socket-and-tcp", ["serve", "-m", "{M}", "--socket", "{B}/s.sock", "--tcp", "1"], 2,
     ["give --socket or --tcp, not both"]),
    ("compact-no-model", ["compact", "-m", "{B}/none.tnb"], 1,
     ["{B}/none.tnb", "train one first with 'textnb train"]),
    ("compact-bad-max-df", ["compact", "-m", "{M}", "--prune", "--max-df", "-1"], 2,
     ["Invalid value for '--max-df'"]),
    ("web-no-record", ["web", "--record", "{B}/none.db", "--users", "{B}/u.json"], 2,
     ["{B}/none.db does not exist", "textnb serve --record"]),
    ("web-public-host", ["web", "--record", "{M}", "--host", "0.0.0.0"], 2,
     ["'0.0.0.0' is not a loopback address", "--allow-remote"]),
    ("web-user-bad-action", ["web-user", "frob", "alice", "--users", "{B}/u.json"], 2,
     ["'frob': use add, remove or list"]),
    ("web-user-remove-unknown", ["web-user", "remove", "bob", "--users", "{B}/u.json"], 1,
     ["no user 'bob'", "{B}/u.json"]),
]


# The users file is read through argon2-cffi's hasher, even to list or remove a login.
NEEDS_ARGON2 = {"web-user-remove-unknown"}


@pytest.mark.parametrize("case, args, code, needles", [pytest.param(*case, id=case[0])
                                                       for case in MATRIX])
def test_bad_input(case, args, code, needles, model, bad):
    if case in NEEDS_ARGON2:
        pytest.importorskip("argon2", reason="the review page's libraries are absent: "
                                             "pip install -e '.[web]'")
    before = _sha(model)
    result, needles = _invoke(args, model, bad, needles)
    check(result, code, needles, model, before)


@pytest.mark.parametrize("args", [
    ["web", "--record", "{M}", "--users", "{B}/u.json"],
    ["web-user", "list", "--users", "{B}/u.json"],
    ["web-user", "remove", "bob", "--users", "{B}/u.json"],
], ids=["web", "web-user-list", "web-user-remove"])
def test_review_commands_without_their_libraries_give_the_install_line(args, model, bad,
                                                                        monkeypatch):
    for module in ("argon2", "uvicorn", "starlette", "jinja2"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails: as if not installed
    before = _sha(model)
    result, needles = _invoke(args, model, bad,
                              ["needs its libraries", "pip install 'textnb[web]'"])
    check(result, 1, needles, model, before)


@pytest.mark.parametrize("command", ["info", "classify", "explain", "evaluate", "export",
                                     "forget", "compact"])
def test_a_missing_model_says_pass_model_only_when_it_was_not_passed(command, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("TEXTNB_MODEL", str(tmp_path / "default.tnb"))
    rest = {"classify": [str(SAMPLE / "mbox")], "explain": [str(SAMPLE / "mbox")],
            "evaluate": ["--index", str(SAMPLE / "index")], "export": [str(tmp_path / "x.pmml")],
            "forget": [str(SAMPLE / "mbox")]}.get(command, [])
    given = runner.invoke(app, [command, "--model", str(tmp_path / "given.tnb"), *rest])
    assert given.exit_code == 1
    assert f"no model at '{tmp_path}/given.tnb'; train one first" in _text(given)
    assert "pass --model" not in _text(given)
    default = runner.invoke(app, [command, *rest])
    assert default.exit_code == 1
    assert f"no model at '{tmp_path}/default.tnb'" in _text(default)
    assert "or pass --model" in _text(default)


def test_every_command_is_in_the_matrix():
    covered = {args[0] for _, args, _, _ in MATRIX}
    commands = {c.name for c in app.registered_commands}
    # filter exits 3 on any error by design (tests/test_filter.py, and below)
    assert commands - covered == {"filter"}


def test_filter_with_a_bad_cost_ratio_passes_the_message_through(model, bad):
    raw = (SAMPLE / "unlabelled" / "001.eml").read_bytes()
    for ratio in ("0", "inf"):
        result = runner.invoke(app, ["filter", "-m", str(model), "-r", ratio], input=raw)
        assert result.exit_code == 3
        assert result.stdout_bytes == raw
        assert f"{float(ratio)} must be > 0 and finite" in _text(result)


# -- damaged and foreign model files -----------------------------------------------------


class _Trap:
    """Unpickling this creates a file: proof that code ran."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _rezip(data: bytes, change) -> bytes:
    """The model's members rewritten by ``change(name, content, meta) -> content``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        meta = json.loads(zin.read("textnb-model.json"))
        contents = {n: change(n, zin.read(n), meta) for n in zin.namelist()
                    if n != "textnb-model.json"}
        zout.writestr("textnb-model.json", json.dumps(meta))
        for name, content in contents.items():
            zout.writestr(name, content)
    return out.getvalue()


def _newer(data, _):
    def change(name, content, meta):
        meta["format_version"] = store.FORMAT_VERSION + 1
        return content
    return _rezip(data, change)


def _flipped_member(data, _):
    """One bit of a member flipped, the ZIP rebuilt around it: only the SHA-256 can tell."""
    def change(name, content, meta):
        if name == "feature_count.npy":
            content = bytearray(content)
            content[-3] ^= 0x10
        return bytes(content)
    return _rezip(data, change)


def _flipped_byte(data, _):
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x01
    return bytes(flipped)


def _pickled(data, sentinel):
    """feature_count.npy replaced by an object array whose unpickling would run code,
    with a matching checksum: only allow_pickle=False stops it."""
    def change(name, content, meta):
        if name == "feature_count.npy":
            buffer = io.BytesIO()
            np.save(buffer, np.array([_Trap(str(sentinel))], dtype=object), allow_pickle=True)
            content = buffer.getvalue()
            meta["sha256"][name] = hashlib.sha256(content).hexdigest()
        return content
    return _rezip(data, change)


def _foreign_zip(data, _):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zout:
        zout.writestr("word/document.xml", "<w/>")
    return out.getvalue()


DAMAGE = {
    "newer-version": (_newer, [f"format version {store.FORMAT_VERSION + 1}", "upgrade textnb"]),
    "truncated": (lambda data, _: data[: len(data) // 2], ["damaged", "restore it from a backup"]),
    "bit-flip-checksum": (_flipped_member, ["checksum mismatch in feature_count.npy",
                                            "train it again"]),
    "bit-flip-raw": (_flipped_byte, ["damaged", "restore it from a backup"]),
    "text-file": (lambda data, _: b"Subject: hi\n\nnot a model\n",
                  ["not a ZIP archive", "check the --model path"]),
    "empty-file": (lambda data, _: b"", ["it is empty", "check the --model path"]),
    "foreign-zip": (_foreign_zip, ["not a textnb model file", "check the --model path"]),
    "pickled-member": (_pickled, ["damaged", "allow_pickle=False", "train it again"]),
}

USERS = {
    "classify": ["classify", "-m", "{M}", "{S}/mbox"],
    "info": ["info", "-m", "{M}"],
    "explain": ["explain", "-m", "{M}", "{S}/unlabelled/001.eml"],
    "evaluate": ["evaluate", "-m", "{M}", "--index", "{S}/index"],
    "retrain": ["retrain", "-m", "{M}", "--spam", "{S}/spam"],
    "forget": ["forget", "-m", "{M}", "{S}/spam"],
    "tune-write": ["tune", "-m", "{M}", "--write", "--index", "{S}/index"],
    "export": ["export", "{B}/out.pmml", "-m", "{M}"],
    "serve": ["serve", "-m", "{M}", "--socket", "{B}/s.sock"],
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("command", USERS)
def test_damaged_model(damage, command, model, bad, pristine, tmp_path):
    make, needles = DAMAGE[damage]
    sentinel = tmp_path / "code-ran"
    model.write_bytes(make(pristine, sentinel))
    before = _sha(model)
    result, needles = _invoke(USERS[command], model, bad, [str(model), *needles])
    check(result, 1, needles, model, before)
    assert not sentinel.exists()
    assert not (bad / "out.pmml").exists() and not (bad / "s.sock").exists()


def test_the_pickle_trap_is_live_but_never_sprung(pristine, tmp_path):
    """The crafted member runs code when unpickled; store.load never unpickles."""
    sentinel = tmp_path / "code-ran"
    data = _pickled(pristine, sentinel)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        member = zf.read("feature_count.npy")
    np.load(io.BytesIO(member), allow_pickle=True)[0].close()
    assert sentinel.exists()  # the trap works ...
    sentinel.unlink()
    with pytest.raises(store.ModelFormatError, match="allow_pickle=False"):
        store.loads(data)
    assert not sentinel.exists()  # ... and loading a model does not spring it


@pytest.mark.parametrize("meta_change", [
    lambda m: [],                                   # not an object
    lambda m: {**m, "sha256": ["vocabulary.json"]},  # checksums not a mapping
    lambda m: {**m, "n_learned": ["spam"]},
    lambda m: {**m, "config": "multinomial"},
], ids=["list", "sha256-list", "n_learned-list", "config-string"])
def test_crafted_description_is_refused_by_name(pristine, meta_change):
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(pristine)) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            content = zin.read(name)
            if name == "textnb-model.json":
                content = json.dumps(meta_change(json.loads(content))).encode()
            zout.writestr(name, content)
    with pytest.raises(store.ModelFormatError, match="damaged"):
        store.loads(out.getvalue(), name="crafted.tnb")


# -- read-only and full disks ---------------------------------------------------------------

WRITERS = {
    "train": ["train", "-m", "{M}", "--index", "{S}/index", "--alpha", "0.5"],
    "retrain": ["retrain", "-m", "{M}", "--spam", "{S}/ham"],
    "forget": ["forget", "-m", "{M}", "{S}/spam/001.eml"],
    "tune-write": ["tune", "-m", "{M}", "--write", "--index", "{S}/index", "-k", "2"],
    "import": ["import", "{B}/model.pmml", "-m", "{M}"],
    "compact": ["compact", "-m", "{M}", "--prune"],
}


@pytest.fixture(scope="module")
def pmml(bad, pristine, tmp_path_factory):
    """A PMML export of the pristine model, for `import`."""
    source = tmp_path_factory.mktemp("pmml") / "model.tnb"
    source.write_bytes(pristine)
    result = runner.invoke(app, ["export", str(bad / "model.pmml"), "-m", str(source)])
    assert result.exit_code == 0, result.output
    return bad / "model.pmml"


def _mount(*args) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def read_only(model):
    """Make the model's folder read-only: a read-only bind mount as root (root ignores
    permission bits), chmod 555 otherwise."""
    folder = model.parent
    if os.geteuid() == 0:
        if not _mount("--bind", "-o", "ro", str(folder), str(folder)):
            pytest.skip("running as root and 'mount --bind -o ro' is not permitted here")
        yield "read-only file system"
        subprocess.run(["umount", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        yield "permission denied"
        folder.chmod(0o755)


@pytest.mark.parametrize("command", WRITERS)
def test_read_only_model_folder(command, model, bad, pmml, read_only):
    before = _sha(model)
    result, needles = _invoke(WRITERS[command], model, bad, [str(model.parent), read_only,
                                                          "choose a writable location"])
    check(result, 1, needles, model, before)


class _FullDisk:
    """A file object whose write stores half the data, then fails as a full disk does."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        self.fh.write(data[: len(data) // 2])
        self.fh.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


@pytest.mark.parametrize("command", WRITERS)
def test_full_disk_simulated(command, model, bad, pmml, monkeypatch):
    fdopen, pwrite = os.fdopen, os.pwrite

    def half_pwrite(fd, data, offset):  # the journal's append (textnb.modelfile.journal)
        pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.os, "fdopen", lambda *a, **k: _FullDisk(fdopen(*a, **k)))
    monkeypatch.setattr(os, "pwrite", half_pwrite)
    before = _sha(model)
    result, needles = _invoke(WRITERS[command], model, bad, [str(model), "no space left on device",
                                                          "free some space", "unchanged"])
    check(result, 1, needles, model, before)


@pytest.fixture
def full_disk(tmp_path, pristine):
    """A real tiny tmpfs holding the model, then filled to the last byte."""
    mountpoint = tmp_path / "tmpfs"
    mountpoint.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mountpoint)):
        pytest.skip("needs root and 'mount -t tmpfs' (the simulated full disk runs everywhere)")
    try:
        path = mountpoint / "model.tnb"
        path.write_bytes(pristine)
        try:
            with open(mountpoint / "filler", "ab") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        yield path
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


@pytest.mark.parametrize("command", ["train", "retrain", "forget"])
def test_full_disk_real(command, full_disk, bad):
    before = _sha(full_disk)
    result, needles = _invoke(WRITERS[command], full_disk, bad, [str(full_disk),
                                                              "no space left on device",
                                                              "free some space"])
    check(result, 1, needles, full_disk, before, allowed={"filler"})


# -- unreadable inputs: skipped and reported, or --strict ----------------------------------------


@pytest.fixture
def deny(monkeypatch):
    """deny(path): reading ``path`` fails with 'permission denied'. chmod 000 for a normal
    user; as root (who ignores permission bits) the same OSError from the open() and
    scandir() that textnb.mail.sources calls."""
    denied: list[Path] = []

    def deny(path: Path) -> Path:
        if os.geteuid() != 0:
            path.chmod(0)
        denied.append(path)
        return path

    if os.geteuid() == 0:
        def refuse(path):
            if Path(path) in denied:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

        real_open, real_os_open, real_scandir = open, os.open, os.scandir
        monkeypatch.setattr(sources, "open", lambda p, *a, **k: refuse(p) or real_open(p, *a, **k),
                            raising=False)
        monkeypatch.setattr(sources.os, "open",
                            lambda p, *a, **k: refuse(p) or real_os_open(p, *a, **k))
        monkeypatch.setattr(sources.os, "scandir", lambda p: refuse(p) or real_scandir(p))
    yield deny
    for path in denied:
        path.chmod(0o755)


@pytest.fixture
def mail(tmp_path) -> Path:
    """A copy of the sample's spam and ham folders, to damage."""
    folder = tmp_path / "mail"
    shutil.copytree(SAMPLE / "spam", folder / "spam")
    shutil.copytree(SAMPLE / "ham", folder / "ham")
    return folder


def _warning(result) -> str:
    return " ".join(result.stderr.split())


def test_unreadable_file_is_skipped_and_reported(model, mail, deny):
    deny(mail / "spam" / "003.eml")
    result = runner.invoke(app, ["train", "-m", str(model), "--spam", str(mail / "spam"),
                                 "--ham", str(mail / "ham"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)  # read once: the 99 others learned or passed
    assert summary["messages"]["spam"] + summary["messages"]["ham"] + summary["passed"] == 99
    assert (f"1 input could not be read and was skipped: '{mail}/spam/003.eml' "
            "(permission denied); fix them and run again, or use --strict to stop at the first"
            in _warning(result))


@pytest.mark.parametrize("args", [
    ["train", "--spam", "{mail}/spam", "--ham", "{mail}/ham"],
    ["retrain", "--spam", "{mail}/spam"],
    ["forget", "{mail}/spam"],
    ["tune", "--write", "-k", "2", "--spam", "{mail}/spam", "--ham", "{mail}/ham"],
], ids=["train", "retrain", "forget", "tune"])
def test_strict_stops_at_the_first_and_keeps_the_model(args, model, mail, deny):
    deny(mail / "spam" / "003.eml")
    before = _sha(model)
    args = [a.format(mail=mail) for a in args]
    result = runner.invoke(app, [args[0], "-m", str(model), "--strict", *args[1:]])
    check(result, 1, [f"cannot read '{mail}/spam/003.eml': permission denied",
                      "check that it exists and is readable"], model, before)


def test_classify_and_evaluate_skip_and_report(model, mail, deny):
    deny(mail / "ham" / "001.eml")
    deny(mail / "ham" / "002.eml")
    classify = runner.invoke(app, ["classify", "-m", str(model), "--json", str(mail / "ham")])
    assert classify.exit_code == 0
    assert len(classify.stdout.splitlines()) == 58
    assert "2 inputs could not be read and were skipped" in _warning(classify)
    evaluate = runner.invoke(app, ["evaluate", "-m", str(model), "--json", "--spam",
                                   str(mail / "spam"), "--ham", str(mail / "ham")])
    assert evaluate.exit_code == 0, evaluate.output
    assert json.loads(evaluate.stdout)["n_messages"] == 98
    assert "2 inputs could not be read" in _warning(evaluate)
    strict = runner.invoke(app, ["classify", "-m", str(model), "--strict", str(mail / "ham")])
    assert strict.exit_code == 1 and f"'{mail}/ham/001.eml'" in _warning(strict)


def test_unreadable_folder_is_skipped(model, mail, deny):
    deny(mail / "spam")
    result = runner.invoke(app, ["retrain", "-m", str(model), "--spam", str(mail / "spam"),
                                 "--ham", str(mail / "ham")])
    assert result.exit_code == 0, result.output
    assert f"'{mail}/spam' (permission denied)" in _warning(result)


def test_missing_and_folder_index_entries_are_skipped(model, tmp_path):
    extra = [f"ham {tmp_path}/gone-{i}.eml" for i in range(4)] + [f"spam {SAMPLE}/spam"]
    index = _absolute_index(tmp_path, "index", extra)
    result = runner.invoke(app, ["train", "-m", str(model), "--index", str(index), "--json",
                                 *EVERY_MESSAGE])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == {"spam": 40, "ham": 60}
    warning = _warning(result)
    assert warning.startswith("textnb: warning: 5 inputs could not be read and were skipped: "
                              f"'{tmp_path}/gone-0.eml' (no such file, listed at {index}:101), ")
    assert "2 more; fix them and run again, or use --strict" in warning
    # tune --write reads the mail twice; each input is reported once
    tune = runner.invoke(app, ["tune", "-m", str(model), "-k", "2", "--index", str(index)])
    assert tune.exit_code == 0, tune.output
    assert "5 inputs could not be read" in _warning(tune)


def test_nothing_readable_is_an_error(model, mail, deny):
    for path in (mail / "ham").iterdir():
        deny(path)
    before = _sha(model)
    for command in (["classify", str(mail / "ham")], ["retrain", "--ham", str(mail / "ham")],
                    ["forget", str(mail / "ham")]):
        result = runner.invoke(app, [command[0], "-m", str(model), *command[1:]])
        check(result, 1, ["60 inputs could not be read", "no input could be read"], model, before)


@pytest.mark.parametrize("command", [["classify"], ["retrain", "--ham"], ["forget"]],
                         ids=["classify", "retrain", "forget"])
def test_an_empty_folder_says_no_message_was_read_and_strict_fails(command, model, tmp_path):
    (tmp_path / "empty").mkdir()
    before = _sha(model)
    args = [command[0], "-m", str(model), *command[1:], str(tmp_path / "empty")]
    lenient = runner.invoke(app, args)
    check(lenient, 0, ["warning: no message was read"], model, before)
    strict = runner.invoke(app, [*args, "--strict"])
    check(strict, 1, ["error: no message was read"], model, before)


def test_a_mistyped_path_is_an_error_even_without_strict(model, mail):
    result = runner.invoke(app, ["classify", "-m", str(model), str(mail / "spam"),
                                 str(mail / "hma")])
    assert result.exit_code == 1
    assert f"no such file or directory: '{mail}/hma'; check the path" in _text(result)


def test_a_file_that_vanishes_mid_run_is_counted(tmp_path):
    copy = tmp_path / "copy.eml"
    index = _absolute_index(tmp_path, "index", [f"ham {copy}"])

    def vanishing():
        copy.write_bytes(b"Subject: soon gone\n\nbye\n")
        messages = sources.iter_index(index)  # checked now: every file exists
        copy.unlink()  # moved away after the check, before the reading
        return messages

    with collecting() as skipped:
        assert len(list(vanishing())) == 100
    assert skipped.inputs == {str(copy): f"no such file, listed at {index}:101"}
    with pytest.raises(SourceError, match=f"index:101: no such message file '{copy}'"):
        list(vanishing())  # the library's default: raise
