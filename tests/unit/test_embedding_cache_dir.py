"""Where the embedding cache lives: the user's cache directory, never the directory a command is
started in (issue 31 item 8: ``.fourfold-cache/`` appeared wherever a user ran fourfold)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fourfold.fingerprint.embedder import CACHE_DIR_ENV, EmbeddingCache, default_cache_path, user_cache_dir

HOME = Path.home()


@pytest.mark.parametrize(("environ", "expected"), [
    ({"XDG_CACHE_HOME": "/var/cache/me"}, Path("/var/cache/me/fourfold")),
    ({}, HOME / ".cache" / "fourfold"),
    ({"XDG_CACHE_HOME": ""}, HOME / ".cache" / "fourfold"),
    ({"XDG_CACHE_HOME": "relative/cache"}, HOME / ".cache" / "fourfold"),     # the XDG spec ignores it
])
def test_user_cache_dir(environ, expected):
    assert user_cache_dir(environ) == expected


def test_the_default_path_is_in_the_user_cache_and_the_options_override_it(monkeypatch, tmp_path):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "fourfold" / "embeddings" / "embeddings.sqlite3"
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env"))
    assert default_cache_path() == tmp_path / "env" / "embeddings" / "embeddings.sqlite3"
    assert default_cache_path(tmp_path / "given") == tmp_path / "given" / "embeddings" / "embeddings.sqlite3"


def test_a_cache_written_from_another_directory_leaves_that_directory_alone(monkeypatch, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with EmbeddingCache() as cache:
        cache.put_many("m", [(b"k" * 32, np.ones(4, dtype=np.float32))])
    assert list(work.iterdir()) == []
    assert (tmp_path / "xdg" / "fourfold" / "embeddings" / "embeddings.sqlite3").is_file()
