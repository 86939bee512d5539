"""A syntactic release is judged with every earlier release of overlapping patients.

Issue 31's findings 3 and 4: E and then E minus one patient were both PASSED (the codes that
vanish are that patient's); k^m with m=2 and then m=1 of one extract were both published,
and ArtUC k=5 and k=10 of one extract were published with no notice either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.core.files import sha256_bytes
from ehr_release.history.checks import check_history
from ehr_release.history.linkage import link_patients
from ehr_release.model.dataset import Dataset
from ehr_release.release.bundle import candidate_dir
from ehr_release.samples.sample import generate_sample
from ehr_release.storage import links, runs, site_policy
from ehr_release.storage.models import DatasetRecord
from ehr_release.storage.runs import Status

KEY = bytes(range(32))
ARTUC_CONFIG = str(Path(__file__).resolve().parents[1] / "examples" / "artuc-mimic" / "config.yaml")
PARKED = [Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
          Status.AWAITING_APPROVAL]


@pytest.fixture(scope="module")
def extract() -> Dataset:
    return generate_sample(150, seed=21)


def _minus(d: Dataset, n: int = 1) -> Dataset:
    keep = d.patient_ids[n:]
    return Dataset(d.patients.loc[keep],
                   d.diagnoses[d.diagnoses["patient_id"].isin(keep)].reset_index(drop=True))


def _release(algorithm: str, dataset: Dataset, raw: dict[str, str]) -> dict[str, bytes]:
    entry = registry.get(algorithm)
    return entry.anonymize(dataset, entry.parse({**raw, "seed": "7"}),
                           np.random.default_rng(7))


def _park(algorithm: str, dataset: Dataset, raw: dict[str, str],
          files: dict[str, bytes] | None = None) -> str:
    """An earlier run awaiting review: linked, pinned, its candidate on disk."""
    files = files if files is not None else _release(algorithm, dataset, raw)
    record = DatasetRecord(fingerprint=dataset.fingerprint(), rows=dataset.n_patients,
                           codes=len(dataset.diagnoses), columns_json="{}", source="x")
    run_id = runs.create_run(run_id=runs.new_run_id(), dataset=record, requester="steward",
                             algorithm=algorithm, parameters=raw, out_dir="/tmp").id
    links.save_links(run_id, links.RUN, "default", link_patients(dataset, "default", KEY))
    runs.pin_candidate(run_id, {n: (sha256_bytes(d), len(d)) for n, d in files.items()})
    folder = candidate_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    for status in PARKED:
        runs.transition(run_id, status, actor="flow")
    return run_id


def _judge(algorithm: str, dataset: Dataset, raw: dict[str, str],
           files: dict[str, bytes] | None = None) -> Any:
    entry = registry.get(algorithm)
    files = files if files is not None else _release(algorithm, dataset, raw)
    return check_history("rel-" + "0" * 32, algorithm, entry.parse(raw), files,
                         link_patients(dataset, "default", KEY))


def test_a_weaker_release_of_the_same_patients_is_refused(ehr_home, extract):
    """Finding 4: k^m m=2 then m=1 — the first certificate's promise would be void."""
    first = _park("disassociation", extract, {"k": "5", "m": "2"})
    verdict = _judge("disassociation", extract, {"k": "5", "m": "1"})
    assert verdict is not None and not verdict.holds
    assert [e.run_id for e, _ in verdict.weaker] == [first]
    requirement = verdict.requirement()
    assert not requirement.passed and "WEAKER than " + first in requirement.measured
    assert "m=1 < 2" in requirement.measured


def test_site_policy_may_allow_a_weaker_release_and_its_reason_is_shown(ehr_home, extract):
    _park("disassociation", extract, {"k": "5", "m": "2"})
    site_policy.set_weaker_policy(True, actor="privacy.officer",
                                  reason="IRB amendment 7 allows m=1 for this cohort")
    verdict = _judge("disassociation", extract, {"k": "5", "m": "1"})
    assert verdict is not None and verdict.holds
    shown = verdict.requirement().measured
    assert "IRB amendment 7 allows m=1 for this cohort" in shown and "privacy.officer" in shown


def test_artuc_k5_then_k10_is_shown_as_history_and_k10_then_k5_is_refused(ehr_home, extract):
    """The check reads parameters and patient overlap here (no differencing pair), so the
    releases' bytes do not matter; ArtUC's own runs are in the conformance suite."""
    placeholder = {"records.csv": b"x\n"}
    first = _park("artuc", extract, {"k": "5", "config": ARTUC_CONFIG}, placeholder)
    stronger = _judge("artuc", extract, {"k": "10", "config": ARTUC_CONFIG}, placeholder)
    assert stronger is not None and stronger.holds
    measured = stronger.requirement().measured
    assert "released before: 1 earlier release" in measured and first in measured
    assert "identical re-run of " + first in measured
    _park("artuc", extract, {"k": "10", "config": ARTUC_CONFIG}, placeholder)
    weaker = _judge("artuc", extract, {"k": "5", "config": ARTUC_CONFIG}, placeholder)
    assert weaker is not None and not weaker.holds and len(weaker.weaker) == 1


def test_an_identical_rerun_is_allowed_and_a_disjoint_history_is_not_shown(ehr_home, extract):
    first = _park("disassociation", extract, {"k": "5", "m": "2"})
    same = _judge("disassociation", extract, {"k": "5", "m": "2"})
    assert same is not None and same.holds and [e.run_id for e in same.earlier] == [first]
    other = generate_sample(80, seed=404)
    other = Dataset(other.patients.rename(index=lambda p: "z" + p), other.diagnoses.assign(
        patient_id=lambda d: "z" + d["patient_id"]))
    alone = _judge("disassociation", other, {"k": "5", "m": "2"})
    assert alone is not None and alone.holds and not alone.earlier


def test_a_dp_release_is_judged_by_epsilon_not_here(ehr_home, extract):
    assert check_history("rel-" + "0" * 32, "diffgen", {"epsilon": 1.0}, {},
                         link_patients(extract, "default", KEY)) is None


def test_an_earlier_release_whose_files_are_gone_fails_a_differencing_pair(ehr_home,
                                                                          extract):
    """Fail closed: a pair that cannot be attacked is not allowed."""
    first = _park("disassociation", extract, {"k": "5", "m": "2"})
    for f in Path(candidate_dir(first)).iterdir():
        f.unlink()
    verdict = _judge("disassociation", _minus(extract), {"k": "5", "m": "2"})
    assert verdict is not None and not verdict.holds and verdict.unreadable == [first]


def test_an_approval_is_refused_when_a_differencing_release_was_parked_meanwhile(ehr_home,
                                                                                extract):
    """Two flows at once: neither saw the other when it was judged; the approval re-judges
    against what is held now, refuses in one line and audits it."""
    from ehr_release import service
    from ehr_release.core.errors import ApprovalError
    from ehr_release.storage.audit import export_events
    from ehr_release.storage.pending import PendingRelease, save_pending

    params = {"k": "5", "m": "2"}
    first = _park("disassociation", extract, params)
    second = _park("disassociation", _minus(extract), params)
    for run_id in (first, second):
        save_pending(PendingRelease(run_id=run_id, candidate_dir=str(candidate_dir(run_id)),
                                    verification_json='{"algorithm":"disassociation",'
                                    '"requirements":[]}', utility_json="{}",
                                    outcome_json="{}", data_use_json="{}",
                                    expires_at="2999-01-01T00:00:00+00:00"))
    with pytest.raises(ApprovalError, match="no longer holds with its release history"):
        service.decide(first, reviewer="rita", decision="approve", reason="ok",
                       publisher=lambda run_id: Status.PUBLISHED)
    assert runs.get_run(first).status == Status.AWAITING_APPROVAL
    assert '"action":"approval.refused"' in export_events(first, "jsonl")
    service.decide(second, reviewer="rita", decision="reject", reason="differencing")
    assert service.decide(first, reviewer="rita", decision="approve", reason="ok",
                          publisher=lambda run_id: Status.PUBLISHED) == Status.PUBLISHED


@pytest.fixture(scope="module")
def small() -> Dataset:
    return generate_sample(30, seed=5)


def test_every_planted_weakening_pair_is_found_and_a_disjoint_history_never_fails(
        tmp_path_factory, small):
    """Hypothesis: random (k, m) pairs on one extract — refused exactly when the second is
    weaker (smaller k or m) and the site has not allowed it; a disjoint extract never."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ehr_release.storage.engine import reset_engines

    placeholder = {"release.parquet": b"x"}
    other = generate_sample(30, seed=405)  # other patients (a relabelled copy would link)
    shifted = Dataset(other.patients.rename(index=lambda p: "x" + p),
                      other.diagnoses.assign(patient_id=lambda d: "x" + d["patient_id"]))

    @settings(max_examples=12, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.integers(2, 9), st.integers(1, 3), st.integers(2, 9), st.integers(1, 3))
    def check(k1: int, m1: int, k2: int, m2: int) -> None:
        home = tmp_path_factory.mktemp("home")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("EHR_RELEASE_HOME", str(home))
            mp.setenv("EHR_RELEASE_DATABASE_URL", f"sqlite:///{home / 'db.sqlite'}")
            reset_engines()
            _park("disassociation", small, {"k": str(k1), "m": str(m1)}, placeholder)
            same = _judge("disassociation", small, {"k": str(k2), "m": str(m2)}, placeholder)
            assert same is not None
            assert same.holds == (k2 >= k1 and m2 >= m1)
            apart = _judge("disassociation", shifted, {"k": str(k2), "m": str(m2)},
                           placeholder)
            assert apart is not None and apart.holds and not apart.earlier
            reset_engines()

    check()


def test_a_release_under_a_model_weaker_on_any_count_is_refused(ehr_home, extract):
    """GCCens' k-map after ArtUC's (k, k^m) of the same patients: k-map over a population
    lets the sample narrow below k where (k, k^m) promised it would not, though it covers
    whole multisets (m = ∞). Weaker on any of k, m and the model is weaker on those
    patients: refused unless the site allows it."""
    placeholder = {"x": b"x"}
    first = _park("artuc", extract, {"k": "5", "config": ARTUC_CONFIG}, placeholder)
    verdict = check_history("rel-" + "0" * 32, "gccens", {"k": 5}, placeholder,
                            link_patients(extract, "default", KEY))
    assert verdict is not None and not verdict.holds
    [(earlier, why)] = verdict.weaker
    assert earlier.run_id == first and why == ["k-map is weaker than (k, k^m)-anonymity"]
