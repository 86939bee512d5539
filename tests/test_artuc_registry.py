"""The three registry entries: parameters, and the MIMIC-III demo example end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.configuration.epsilon import resolve_epsilon
from ehr_release.core.errors import ParameterError
from tests.kkm_release import read_records, to_files

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "artuc-mimic"
PARAMS = {"k": "5", "m": "2", "delta": "0.4", "config": str(EXAMPLE / "config.yaml"),
          "seed": "1"}


def test_entries_are_registered_with_their_parameters() -> None:
    common = {"k", "m", "delta", "epsilon", "config", "constraints", "weights", "code_weights",
              "seed", "compare"}
    for name in ("artuc-baseline", "artuc-unconstrained"):
        assert {p.name for p in registry.get(name).params} == common
    assert {p.name for p in registry.get("rmr").params} == common | {"codes"}
    assert {p.name for p in registry.get("artuc").params} == common | {
        "merge_stop", "merge_order", "relax", "relax_delta", "relax_epsilon"}
    parsed = registry.get("artuc").parse(PARAMS)
    assert parsed["k"] == 5 and parsed["delta"] == 0.4 and parsed["epsilon"] == "6%"


@pytest.mark.parametrize("given, rule", [
    ({"k": "1"}, "'k' must be an integer ≥ 2"),
    ({"m": "0"}, "'m' must be an integer ≥ 1"),
    ({"delta": "1.5"}, "'delta' must be a number in [0, 1]"),
    ({"epsilon": "six"}, "'epsilon' must be a number of codes"),
    ({"weights": "age"}, "'weights' must look like NAME=WEIGHT"),
    ({"config": "no/such.yaml"}, "'config' must be an existing file"),
    ({"constraints": "no/such.yaml"}, "'constraints' must be empty or an existing file"),
])
def test_bad_parameters_are_refused_with_the_rule(given, rule) -> None:
    with pytest.raises(ParameterError) as err:
        registry.get("artuc").parse({**PARAMS, **given})
    assert rule in str(err.value)


def test_epsilon_is_a_count_or_a_share_of_the_distinct_codes() -> None:
    assert resolve_epsilon("12", 581) == 12
    assert resolve_epsilon("6%", 581) == pytest.approx(34.86)
    with pytest.raises(ParameterError):
        resolve_epsilon("-3", 10)


@pytest.fixture(scope="module")
def mimic():
    from tests.conftest import SHARED_DATA

    if not (SHARED_DATA / "mimic3-demo").exists():
        pytest.skip("MIMIC-III demo not found")
    from ehr_release.ingest.readers import read_dataset

    return read_dataset(SHARED_DATA / "mimic3-demo")


@pytest.mark.parametrize("name", ["artuc", "artuc-baseline", "rmr", "artuc-unconstrained"])
def test_mimic_example_releases_verify(mimic, name) -> None:
    entry = registry.get(name)
    params = entry.parse({**PARAMS, "compare": "false"})
    files = entry.anonymize(mimic, params, np.random.default_rng(1))
    records = read_records(files)
    assert set(records[0]["demographics"]) == {"age", "gender", "ethnicity", "marital_status",
                                               "insurance"}
    report = entry.verify(files, mimic, params)
    assert report.holds, report.failures
    utility = entry.evaluate(files, mimic, params, np.random.default_rng(2))
    assert {"NCP", "UL", "ARE W1", "ARE W2", "ARE W3", "records suppressed"} <= set(
        utility.metrics)
    assert "3 demographic columns of the input are not configured" in utility.notes[0]
    if name != "artuc-baseline":
        assert utility.metrics["NCP"] <= 0.4 + 1e-9


def test_evaluate_compares_with_rmr_and_baseline(mimic) -> None:
    entry = registry.get("artuc")
    params = entry.parse(PARAMS)
    files = entry.anonymize(mimic, params, np.random.default_rng(1))
    utility = entry.evaluate(files, mimic, params, np.random.default_rng(2))
    table = {row["algorithm"]: row for row in utility.tables["comparison"]}
    assert set(table) == {"artuc", "rmr", "artuc-baseline"}
    assert table["artuc"]["records satisfying the utility constraints"] == 1.0
    assert table["rmr"]["records satisfying the utility constraints"] < 1.0
    assert "additional utility loss of rmr vs ArtUC (%)" in utility.metrics
    assert utility.charts and utility.charts[0].png.startswith(b"\x89PNG")


def test_compare_auto_skips_the_comparators_over_the_limit_and_says_so(mimic,
                                                                        monkeypatch) -> None:
    monkeypatch.setattr("ehr_release.registry.artuc.COMPARE_AUTO_MAX", 99)
    entry = registry.get("artuc")
    params = entry.parse(PARAMS)
    files = entry.anonymize(mimic, params, np.random.default_rng(1))
    utility = entry.evaluate(files, mimic, params, np.random.default_rng(2))
    assert {row["algorithm"] for row in utility.tables["comparison"]} == {"artuc"}
    assert any("has 100 patients, more than compare=auto's limit of 99" in n
               for n in utility.notes)


def test_chapter_constraints_on_the_demo_stop_at_epsilon(mimic) -> None:
    entry = registry.get("artuc")
    params = entry.parse({**PARAMS, "constraints": str(EXAMPLE / "constraints-chapters.yaml")})
    with pytest.raises(ParameterError, match="'epsilon' is below the .* codes GenDiag had to "
                                             "suppress"):
        entry.anonymize(mimic, params, np.random.default_rng(1))


def test_verify_through_the_entry_rejects_a_tampered_release(mimic) -> None:
    entry = registry.get("artuc")
    params = entry.parse(PARAMS)
    files = entry.anonymize(mimic, params, np.random.default_rng(1))
    lines = read_records(files)
    first = lines[0]
    first["demographics"]["gender"] = "F" if first["demographics"]["gender"] == "M" else "M"
    tampered = to_files(lines)
    assert not entry.verify(tampered, mimic, params).holds


def test_compare_auto_runs_the_comparators_only_on_small_extracts() -> None:
    from ehr_release.registry import artuc as glue

    params = registry.get("artuc").parse(PARAMS)
    assert params["compare"] == "auto"
    assert glue.wants_comparison(params, glue.COMPARE_AUTO_MAX)
    assert not glue.wants_comparison(params, glue.COMPARE_AUTO_MAX + 1)
    assert glue.wants_comparison({**params, "compare": "true"}, 10**7)
    assert not glue.wants_comparison({**params, "compare": "False"}, 10)
    with pytest.raises(ParameterError, match="compare"):
        registry.get("artuc").parse({**PARAMS, "compare": "sometimes"})
