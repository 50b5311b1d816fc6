"""The sample corpus: corpora/make_sample.py --check passes on the committed tree, and
fails, naming the problem, on each kind of damage it is there to catch."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import PROJECT, SAMPLE

SCRIPT = PROJECT / "corpora" / "make_sample.py"
PROVENANCE = PROJECT / "corpora" / "PROVENANCE.md"


def _load_script():
    spec = importlib.util.spec_from_file_location("make_sample", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_sample = _load_script()


def test_check_passes_on_the_committed_sample():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "60 ham, 40 spam, 6 unlabelled" in done.stdout
    assert "PROBLEM" not in done.stdout
    # --check writes nothing
    assert subprocess.run(["git", "status", "--porcelain", "corpora/sample"], cwd=PROJECT,
                          capture_output=True, text=True).stdout == ""


def test_index_and_mbox_are_derived_from_the_messages():
    files = make_sample.messages(SAMPLE)
    assert make_sample.make_index(files) == (SAMPLE / "index").read_bytes()
    assert make_sample.make_mbox(files) == (SAMPLE / "mbox").read_bytes()


def test_the_feature_table_in_provenance_is_the_scripts():
    done = subprocess.run([sys.executable, str(SCRIPT), "--table"], capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.startswith("| feature | files |")
    assert done.stdout in PROVENANCE.read_text(encoding="utf-8")


@pytest.fixture
def tree(tmp_path):
    """A copy of the sample tree to damage."""
    copy = tmp_path / "sample"
    shutil.copytree(SAMPLE, copy)
    return copy


def _problems(tree):
    return make_sample.check_tree(tree, PROVENANCE)


def test_an_intact_copy_has_no_problems(tree):
    assert _problems(tree) == []


def test_a_changed_message_is_reported(tree):
    path = tree / "ham" / "003.eml"
    path.write_bytes(path.read_bytes().replace(b"\n\n", b"\n\nP.S. one more line.\n", 1))
    problems = _problems(tree)
    assert any("tree digest" in p for p in problems), problems
    assert any("Total size" in p or "total size" in p for p in problems), problems


def test_a_reordered_index_is_stale(tree):
    lines = (tree / "index").read_bytes().splitlines(keepends=True)
    (tree / "index").write_bytes(b"".join([lines[1], lines[0], *lines[2:]]))
    assert any("sample/index is stale" in p for p in _problems(tree))


def test_a_leaking_header_or_a_real_address_is_reported(tree):
    path = tree / "spam" / "001.eml"
    data = path.read_bytes()
    path.write_bytes(b"X-Spam-Flag: YES\nList-Unsubscribe: <https://bank.com/>\n"
                     + data.replace(b"\n\n", b"\n\nsee http://8.8.8.8/x\n", 1))
    problems = " ".join(_problems(tree))
    assert "spam/001.eml: carries a spam-filter header" in problems
    assert "spam/001.eml: IP outside the RFC 5737 documentation ranges: b'8.8.8.8'" in problems
    assert "spam/001.eml: URL host not under example: b'bank.com'" in problems


def test_a_malformed_message_that_is_no_longer_broken_is_reported(tree):
    # spam/037.eml is tagged "NUL bytes in the body"; without them it is mislabelled
    path = tree / "spam" / "037.eml"
    path.write_bytes(path.read_bytes().replace(b"\x00", b" "))
    assert any(p.startswith("spam/037.eml: tagged 'NUL bytes in the body' but is not broken")
               for p in _problems(tree))


def test_a_numbering_gap_is_reported(tree):
    (tree / "ham" / "060.eml").rename(tree / "ham" / "061.eml")
    assert "ham/ is not numbered 001, 002, ... in delivery order" in _problems(tree)
