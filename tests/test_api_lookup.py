"""When the flow process may ask for this home's local server before Prefect is imported
(issue 37 goal 2: a cold run's server starts while Prefect loads): only where none of the
places Prefect's settings come from could name another API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ehr_release.flows.server import API_NAMING_VARIABLES, only_the_local_api


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder and a Prefect home with nothing in them, and no Prefect variable
    that could name an API."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith(API_NAMING_VARIABLES)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    (tmp_path / "prefect-home").mkdir()
    return tmp_path


def test_nothing_configured_means_the_local_server(bare: Path) -> None:
    (bare / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["prefect"]\n')
    (bare / ".env").write_text("OTHER=1\n")
    (bare / "prefect-home" / "profiles.toml").write_text('active = "ephemeral"\n')
    assert only_the_local_api()


@pytest.mark.parametrize("variable", ["PREFECT_API_URL", "PREFECT_PROFILE",
                                      "PREFECT_PROFILES_PATH"])
def test_a_prefect_variable_that_could_name_an_api(bare: Path, monkeypatch, variable) -> None:
    monkeypatch.setenv(variable, "x")
    assert not only_the_local_api()


@pytest.mark.parametrize(("place", "text"), [
    ("prefect.toml", "[logging]\nlevel = 'INFO'\n"),  # any prefect.toml: not read here
    (".env", "PREFECT_API_URL=http://prefect.example/api\n"),
    (".env", "PREFECT_PROFILES_PATH=/srv/prefect/profiles.toml\n"),  # a profile elsewhere
    ("pyproject.toml", "[tool.prefect.api]\nurl = 'http://prefect.example/api'\n"),
    ("prefect-home/profiles.toml",
     "[profiles.site]\nPREFECT_API_URL = 'http://prefect.example/api'\n"),
])
def test_a_file_that_could_name_an_api(bare: Path, place: str, text: str) -> None:
    (bare / place).write_text(text)
    assert not only_the_local_api()


def test_an_unreadable_file_counts_as_naming_one(bare: Path) -> None:
    (bare / ".env").mkdir()  # reading it fails with IsADirectoryError
    assert not only_the_local_api()
