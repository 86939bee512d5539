"""Step 19's order: the paper's least-UL-first, and the suppression-first deviation (issue 18).

The constructed extract: one demographic (age in [0, 100]), k = 2, m = 2, and two code sets
(250.00 and 042) so 042 can be neither generalized with 250.00 nor kept where it appears
once. Formation makes four pairs:

* A (ages 40, 41) and B (50, 51): 250.00 only — nothing suppressed, UL 0;
* C (44, 45) and D (47, 48): one record with 042 each — 042 is suppressed in each alone.

δ = 0.06125 allows NCP 0.49 in total over the 8 records (0.08 after formation). The paper
takes A first (least UL, lowest id) and merges it with B (merged UL 0, +0.40): C ∪ D (+0.12)
no longer fits and both 042s are suppressed. Suppression-first takes C first and merges it
with D (042 then has support 2: UL 0); B then joins them (+0.24), A ∪ B no longer fits.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from ehr_release import registry
from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.configuration.constraints import parse_config, rt_data
from ehr_release.core.errors import ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.kkm import check_kkm
from tests.test_artuc_registry import PARAMS, mimic  # noqa: F401 - fixture

CONFIG = {"attributes": {"age": {"type": "numerical", "domain": [0, 100]}},
          "constraints": [{"name": "common", "age": "All", "codes": ["250.00"]},
                          {"name": "rare", "age": "All", "codes": ["042"]}]}
ROWS = [(40, "250.00"), (41, "250.00"), (50, "250.00"), (51, "250.00"),
        (44, "250.00 042"), (45, "250.00"), (47, "250.00 042"), (48, "250.00")]
DELTA = 0.06125


def constructed() -> Dataset:
    demo = pd.DataFrame({"age": [r[0] for r in ROWS]})
    return Dataset.from_records([r[1].split() for r in ROWS], demo,
                                patient_ids=[f"p{i}" for i in range(len(ROWS))])


def _clusters(anon) -> list[list[int]]:
    return sorted(sorted(int(r) for r in c.rows) for c in anon.clusters)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_suppression_first_takes_the_suppressing_cluster_before_the_least_ul_one(
        seed: int) -> None:
    ds = constructed()
    cfg = parse_config(CONFIG, lambda ref: pytest.fail(f"no file hierarchy: {ref}"))
    data = rt_data(ds, cfg)

    def run(**order):
        return artuc(data, cfg, k=2, m=2, delta=DELTA, epsilon=2,
                     rng=np.random.default_rng(seed), **order)

    paper, first, default = run(order="paper"), run(order="suppression-first"), run()
    assert _clusters(paper) == [[0, 1, 2, 3], [4, 5], [6, 7]]  # A ∪ B spent δ
    assert _clusters(first) == [[0, 1], [2, 3, 4, 5, 6, 7]]    # C ∪ D, then B
    assert paper.suppressed_codes == 2 and first.suppressed_codes == 0
    assert release_files(default) == release_files(paper)
    for anon in (paper, first):
        assert anon.ncp <= DELTA + 1e-12
        report = check_kkm(release_files(anon), ds, cfg, algorithm="artuc",
                           k=2, m=2, delta=DELTA, epsilon=2, constrained=True)
        assert report.holds, report.failures


def test_an_unknown_order_is_refused(config_file: Path) -> None:
    ds = constructed()
    cfg = parse_config(CONFIG, lambda ref: pytest.fail(f"no file hierarchy: {ref}"))
    with pytest.raises(ValueError, match="order must be one of"):
        artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=DELTA, epsilon=2,
              rng=np.random.default_rng(0), order="most-suppressed")
    for bad in ("suppression_first", "Paper", ""):
        with pytest.raises(ParameterError,
                           match="'merge_order' must be one of paper, suppression-first"):
            registry.get("artuc").parse({**PARAMS, "merge_order": bad})


def _params(config_file: Path, **extra: str) -> dict:
    return registry.get("artuc").parse({"k": "2", "m": "2", "delta": str(DELTA),
                                        "epsilon": "1", "config": str(config_file),
                                        "compare": "false", **extra})


def test_through_the_registry_suppression_first_meets_epsilon_and_passes_verify_and_attack(
        config_file: Path) -> None:
    """ε = 1: the paper's order fails Step 26 (2 codes suppressed); suppression-first
    publishes a release the independent verifier and the attack audit both accept."""
    entry, ds = registry.get("artuc"), constructed()
    with pytest.raises(ParameterError, match="'epsilon' is below the 2 codes"):
        entry.anonymize(ds, _params(config_file), np.random.default_rng(0))
    params = _params(config_file, merge_order="suppression-first")
    files = entry.anonymize(ds, params, np.random.default_rng(0))
    report = entry.verify(files, ds, params)
    assert report.holds, report.failures
    attack = entry.attack(files, ds, params)
    assert attack.passed and attack.smallest_candidate_set >= 2


def test_the_certificate_names_the_deviation(config_file: Path) -> None:
    from ehr_release.documents.certificate import CertificateContext, render_certificate_html
    from ehr_release.model.reports import Requirement, VerificationReport
    from ehr_release.tasks.certify import parameter_help

    entry, ds = registry.get("artuc"), constructed()

    def html_for(params: dict) -> str:
        files = entry.anonymize(ds, params, np.random.default_rng(0))
        utility = entry.evaluate(files, ds, params, np.random.default_rng(1))
        return render_certificate_html(CertificateContext(
            run_id="rel-" + "0" * 32, created_at=datetime(2026, 1, 1, tzinfo=UTC),
            requester="steward", dataset_source="constructed.csv",
            dataset_fingerprint="ab" * 32, dataset_rows=ds.n_patients,
            dataset_schema={"age": "Int64", "codes": "set[icd9]"}, algorithm="artuc",
            algorithm_summary=entry.summary, privacy_model=entry.privacy_model,
            parameters=params, verification=VerificationReport("artuc", [
                Requirement("k^m", "≥ 2", "2", True)]),
            utility=utility, manifest=[(name, "cd" * 32, len(data))
                                       for name, data in sorted(files.items())],
            approval=None, audit_head="ef" * 32, audit_events=3,
            status="verified — awaiting reviewer decision",
            parameter_help=parameter_help(entry)))

    deviating = html_for(_params(config_file, merge_order="suppression-first", epsilon="2"))
    paper = html_for(_params(config_file, epsilon="2"))
    note = "merge_order=suppression-first — a deviation from the ArtUC paper"
    assert note in deviating and note not in paper
    # the parameter's own help, printed beside its value in both
    assert deviating.count("DEVIATION FROM THE PAPER") == paper.count(
        "DEVIATION FROM THE PAPER") == 1


def test_the_registry_default_is_the_papers_order(mimic) -> None:  # noqa: F811
    """On the MIMIC demo example: no merge_order and merge_order=paper give the same bytes,
    and the default parses to 'paper'."""
    entry = registry.get("artuc")
    default = entry.parse({**PARAMS, "compare": "false"})
    assert default["merge_order"] == "paper"
    out = [entry.anonymize(mimic, p, np.random.default_rng(1))
           for p in (default, entry.parse({**PARAMS, "compare": "false",
                                           "merge_order": "paper"}))]
    assert out[0] == out[1]
