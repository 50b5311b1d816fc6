"""Shared fixtures: the project's own sample corpus and a small trained filter."""

from pathlib import Path

import pytest

from textnb.corpora import corpora_root

PROJECT = Path(__file__).resolve().parents[1]
SAMPLE = PROJECT / "corpora" / "sample"
SAMPLE_INDEX = SAMPLE / "index"


@pytest.fixture(scope="session")
def sample_index() -> Path:
    return SAMPLE_INDEX


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    root = corpora_root()
    if root is None:
        pytest.skip("the public corpora are absent: set TEXTNB_CORPORA or place them at "
                    "../shared/corpora to run this test")
    return root


@pytest.fixture(scope="session")
def sample_filter():
    """A filter trained on the whole sample index with the default config."""
    from textnb.pipeline import SpamFilter
    from textnb.sources import iter_index

    return SpamFilter().fit(iter_index(SAMPLE_INDEX))


@pytest.fixture(scope="session")
def sample_model_file(tmp_path_factory, sample_filter) -> Path:
    """``sample_filter`` saved as a model file (read-only use: tests must not change it)."""
    from textnb import store

    path = tmp_path_factory.mktemp("sample-model") / "sample.tnb"
    store.save(sample_filter, path)
    return path


@pytest.fixture
def model_path(tmp_path) -> Path:
    return tmp_path / "model.tnb"
