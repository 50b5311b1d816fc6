"""The README's set-up commands are the ones CI runs, and the sample it names exists."""

import re

from conftest import PROJECT


def _shell_blocks(text):
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    readme = (PROJECT / "README.md").read_text()
    test_command = _shell_blocks(readme)[1].strip()
    ci = (PROJECT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


def test_readme_main_command_uses_files_that_exist():
    readme = (PROJECT / "README.md").read_text()
    main_command = _shell_blocks(readme)[0]
    for path in re.findall(r"corpora/[\w/]+", main_command):
        assert (PROJECT / path).exists(), path
