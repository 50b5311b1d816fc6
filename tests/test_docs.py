"""The README's set-up commands are the ones CI runs, and the sample it names exists."""

import re

import pytest

from conftest import PROJECT


def _shell_blocks(text):
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_commands_first_as_a_newcomer():
    """.ci/run's first pass: the README's set-up and test commands exactly, in a new virtual
    environment, before any extra is installed; then every tier of tests."""
    readme = (PROJECT / "README.md").read_text()
    set_up, test_command = (block.strip() for block in _shell_blocks(readme)[:2])
    lines = (PROJECT / ".ci" / "run").read_text().splitlines()
    venv = next(i for i, line in enumerate(lines) if "-m venv" in line)
    first_extra = next(i for i, line in enumerate(lines) if "install" in line and ".[" in line
                       and "[test]" not in line)
    assert venv < lines.index(set_up) < lines.index(test_command) < first_extra
    assert any("pytest" in line and '-m "system or not system"' in line
               for line in lines[first_extra:])


def test_readme_main_command_uses_files_that_exist():
    readme = (PROJECT / "README.md").read_text()
    main_command = _shell_blocks(readme)[0]
    for path in re.findall(r"corpora/[\w/]+", main_command):
        assert (PROJECT / path).exists(), path


def test_the_readme_set_up_leaves_nothing_untracked():
    import shutil
    import subprocess

    if shutil.which("git") is None or not (PROJECT / ".git").exists():
        pytest.skip("not a git checkout (or git is absent): nothing to be untracked in")
    model = re.search(r"--model (\S+)", _shell_blocks((PROJECT / "README.md").read_text())[0])
    for written in (model.group(1), model.group(1) + ".lock"):
        ignored = subprocess.run(["git", "check-ignore", "-q", written], cwd=PROJECT)
        assert ignored.returncode == 0, f"{written} is not in .gitignore"


def _reference_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_cli_reference", PROJECT / "docs" / "make_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REGENERATE = "run `python docs/make_cli_reference.py` and commit docs/cli.md"


def test_every_command_is_in_the_cli_reference():
    from textnb.cli import app

    reference = _reference_script()
    documented = reference.commands_in((PROJECT / "docs" / "cli.md").read_text(encoding="utf-8"))
    registered = sorted(command.name for command in app.registered_commands)
    missing = sorted(set(registered) - set(documented))
    assert not missing, f"docs/cli.md lacks {missing}: {REGENERATE}"
    assert sorted(documented) == registered, f"docs/cli.md documents {documented}: {REGENERATE}"


def test_the_cli_reference_is_up_to_date():
    reference = _reference_script()
    committed = (PROJECT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert reference.render() == committed, f"docs/cli.md is out of date: {REGENERATE}"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    heading = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def test_links_between_the_docs_resolve():
    """Every relative link in README.md and docs/**/*.md names a file that exists and, with
    '#anchor', a heading in it: moving text between pages must not leave links dangling."""
    pages = _markdown_files()
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", file.read_text(
                    encoding="utf-8"), flags=re.S), flags=re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def _markdown_files():
    return [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("**/*.md"))]


def test_no_document_repeats_a_heading_or_a_paragraph():
    # A scripted edit once left seven sections of a docs page in it twice, and the link
    # checks above still passed.
    import collections

    repeats = []
    for path in _markdown_files():
        text = path.read_text()
        headings = collections.Counter(
            line for line in text.splitlines() if re.match(r"#{1,6} ", line))
        paragraphs = collections.Counter(
            p.strip() for p in text.split("\n\n") if len(p.strip()) > 200)
        repeats += [f"{path.name}: {item[:70]!r} x{n}"
                    for counter in (headings, paragraphs) for item, n in counter.items() if n > 1]
    assert not repeats, "\n".join(repeats)
