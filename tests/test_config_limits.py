"""Issue 33 item 6: a 2 KB configuration nested 1,000 levels deep ended in a RecursionError
traceback. Every reader of an owner's configuration now refuses too deep or too large a
file with one ConfigError line naming it, before anything recurses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ehr_release.configuration import limits, taxonomies
from ehr_release.configuration.constraints import load_config as load_artuc_config
from ehr_release.configuration.constraints import read_hierarchy_file
from ehr_release.configuration.limits import MAX_DEPTH, load_config_yaml
from ehr_release.configuration.policies import resolve_policy
from ehr_release.core.errors import ConfigError, EhrReleaseError
from ehr_release.model.dataset import Dataset
from ehr_release.registry.rmr import code_hierarchy_of

#: 2,000 bytes: a list in a list … 1,000 levels deep.
DEEP = "[" * 1000 + "]" * 1000
#: 60 levels deep, though no line is nested more than 3: aliases of aliases.
ALIASED = "a0: &a0 [[[x]]]\n" + "".join(f"a{i}: &a{i} [[[*a{i - 1}]]]\n" for i in range(1, 20))
SELF = "a: &a [1, *a]\n"


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _one_line_config_error(call, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as refused:
        call()
    assert "\n" not in str(refused.value)


def _dataset() -> Dataset:
    return Dataset.from_records([["401.9", "250.00"], ["272.0"]])


READERS = {
    "artuc configuration": lambda p: load_artuc_config(p),
    "artuc constraints": lambda p: load_artuc_config(_fine_artuc(p.parent), constraints=p),
    "yaml hierarchy": lambda p: read_hierarchy_file(p.name, p.parent),
    "disassociation policy": lambda p: resolve_policy(str(p), _dataset()),
    "diffgen taxonomies": lambda p: taxonomies.load_config(str(p)),
    "rmr code hierarchy": lambda p: code_hierarchy_of({"config": str(p)}),
}


def _fine_artuc(folder: Path) -> Path:
    path = folder / "fine.yaml"
    path.write_text("attributes: {}\n")
    return path


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("text", [DEEP, ALIASED, SELF], ids=["deep", "aliased", "self"])
def test_every_config_reader_refuses_a_too_deep_file_in_one_line(tmp_path, reader, text):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    _one_line_config_error(lambda: READERS[reader](path),
                           r"nested deeper than 32|contain itself")


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_config_reader_refuses_a_too_large_file_unread(tmp_path, reader, monkeypatch):
    monkeypatch.setattr(limits, "MAX_CONFIG_BYTES", 1000)
    path = tmp_path / "large.yaml"
    path.write_text("# " + "x" * 2000 + "\nattributes: {}\n")
    _one_line_config_error(lambda: READERS[reader](path), "larger than a configuration")


def test_the_depth_limit_is_exact():
    assert load_config_yaml(_nested(MAX_DEPTH), "t") is not None
    with pytest.raises(ConfigError, match="nested deeper"):
        load_config_yaml(_nested(MAX_DEPTH + 1), "t")
    # aliases shared many times are measured once (no exponential walk)
    wide = "a0: &a0 [x, x]\n" + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 8)}]\n"
                                       for i in range(1, 25))
    assert len(load_config_yaml(wide, "t")) == 25


def test_the_cli_refuses_a_deep_artuc_configuration_with_one_line(ehr_home, tmp_path):
    from ehr_release.cli import app

    config = tmp_path / "deep.yaml"
    config.write_text(DEEP)
    data = tmp_path / "patients.csv"
    data.write_text("patient_id,codes\nS1,401.9\n")
    result = CliRunner().invoke(app, ["run", "--input", str(data), "--algorithm", "artuc",
                                      "--param", f"config={config}", "--requester", "s"])
    assert result.exit_code == 1, result.output
    assert "nested deeper than 32" in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, RecursionError)


def test_a_deep_comparison_file_is_one_line(tmp_path):
    from ehr_release.comparison.comparison_file import load_comparison_row

    (tmp_path / "comparison.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EhrReleaseError, match="nested too deeply"):
        load_comparison_row(str(tmp_path), 0)
    (tmp_path / "comparison.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(EhrReleaseError, match="has rows"):
        load_comparison_row(str(tmp_path), 0)
