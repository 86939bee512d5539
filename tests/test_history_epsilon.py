"""ε per patient across every DP release that held them, whatever the extract's ids or file.

Issue 31's findings 1 and 2: the account was kept per exact extract fingerprint, so the same
patients relabelled (every id + 1,000,000), the extract minus one patient, an added column...
each opened a fresh account; and with no site total set nothing was capped at all.
"""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

from ehr_release.history.linkage import link_patients, overlap
from ehr_release.model.dataset import Dataset
from ehr_release.samples.sample import generate_sample
from ehr_release.storage import budget, links, runs, site_policy
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import DatasetRecord
from tests.reservation_race import race

DP = budget.dp_algorithm_names()
KEY = bytes(range(32))


@pytest.fixture(scope="module")
def extract() -> Dataset:
    return generate_sample(60, seed=11)


def _relabelled(d: Dataset, shift: int = 1_000_000) -> Dataset:
    """The same patients under new ids (what finding 1 published)."""
    new = {p: f"{int(''.join(c for c in p if c.isdigit())) + shift}" for p in d.patient_ids}
    patients = d.patients.rename(index=new)
    patients.index.name = d.patients.index.name
    diagnoses = d.diagnoses.assign(patient_id=d.diagnoses["patient_id"].map(new))
    return Dataset(patients, diagnoses, source="relabelled")


def _without_first(d: Dataset, n: int = 1) -> Dataset:
    keep = d.patient_ids[n:]
    return Dataset(d.patients.loc[keep],
                   d.diagnoses[d.diagnoses["patient_id"].isin(keep)].reset_index(drop=True))


def _with_column(d: Dataset) -> Dataset:
    return Dataset(d.patients.assign(site="north"), d.diagnoses)


def _columns_reordered(d: Dataset) -> Dataset:
    return Dataset(d.patients[list(reversed(d.patients.columns))], d.diagnoses)


def _rows_changed(d: Dataset) -> Dataset:
    """A few rows' values changed (a corrected demographic), same ids."""
    patients = d.patients.copy()
    column = patients.columns[0]
    changed = patients[column].astype(object)
    changed.iloc[:5] = "corrected"
    patients[column] = changed
    return Dataset(patients, d.diagnoses)


def _dp_run(engine, dataset: Dataset, epsilon: str = "1", source: str = "default") -> str:
    """A DiffGen run on ``dataset``, its patients linked, its ε reserved (or refused)."""
    fingerprint = dataset.fingerprint()
    record = DatasetRecord(fingerprint=fingerprint, rows=dataset.n_patients,
                           codes=len(dataset.diagnoses), columns_json="{}", source="x")
    run_id = runs.create_run(run_id=runs.new_run_id(), dataset=record, requester="steward",
                             algorithm="diffgen",
                             parameters={"epsilon": epsilon, "h": "3", "taxonomies": "adult"},
                             out_dir="/tmp", engine=engine).id
    links.save_links(run_id, links.RUN, source, link_patients(dataset, source, KEY), engine)
    return run_id


def _draw(engine, dataset: Dataset, epsilon: str = "1") -> str:
    run_id = _dp_run(engine, dataset, epsilon)
    budget.refuse_beyond_total(run_id, DP, engine)
    runs.pin_candidate(run_id, {"groups.csv": ("00" * 32, 1)}, engine)
    return run_id


@pytest.mark.parametrize("variant", [_relabelled, _without_first, _with_column,
                                     _columns_reordered, _rows_changed])
def test_the_per_patient_account_survives_what_changes_an_extracts_fingerprint(
        db_url, extract, variant):
    """Finding 1: each of these opened a fresh account before (same fingerprint only)."""
    engine = get_engine(db_url)
    site_policy.set_epsilon_total("2", actor="admin", reason="test", engine=engine)
    _draw(engine, extract)
    _draw(engine, extract)
    other = variant(extract)
    assert other.fingerprint() != extract.fingerprint()
    third = _dp_run(engine, other)
    with pytest.raises(budget.EpsilonBudgetExhausted, match="cumulative ε on these patients"):
        budget.refuse_beyond_total(third, DP, engine)


def test_relabelled_patients_under_another_source_are_still_linked(db_url, extract):
    engine = get_engine(db_url)
    site_policy.register_source("ward-b", actor="admin", engine=engine)
    site_policy.set_epsilon_total("1", actor="admin", reason="test", engine=engine)
    _draw(engine, extract)
    third = _dp_run(engine, _relabelled(extract), source="ward-b")
    with pytest.raises(budget.EpsilonBudgetExhausted):
        budget.refuse_beyond_total(third, DP, engine)


def test_a_disjoint_extract_carries_nothing(db_url, extract):
    engine = get_engine(db_url)
    site_policy.set_epsilon_total("1", actor="admin", reason="test", engine=engine)
    _draw(engine, extract)
    other = generate_sample(40, seed=99)
    other = _relabelled(other, shift=5_000_000)
    spent = budget.refuse_beyond_total(_dp_run(engine, other), DP, engine)
    assert spent is not None and spent.earlier == 0 and spent.releases == 0


def test_with_no_site_total_set_a_default_total_caps_epsilon(db_url, extract):
    """Finding 2: unset, nothing was refused; now the default (3) is in force."""
    engine = get_engine(db_url)
    assert site_policy.epsilon_total(engine) == Fraction(3)
    for _ in range(3):
        _draw(engine, extract)
    fourth = _dp_run(engine, extract)
    with pytest.raises(budget.EpsilonBudgetExhausted, match="site total ε = 3 per patient"):
        budget.refuse_beyond_total(fourth, DP, engine)


def test_changing_the_total_is_an_audited_admin_action(db_url):
    from ehr_release.storage.audit import iter_events

    engine = get_engine(db_url)
    site_policy.set_epsilon_total("5", actor="privacy.officer", reason="IRB 2026-11",
                                  engine=engine)
    assert site_policy.epsilon_total(engine) == 5
    events = [e for e in iter_events(engine=engine) if e.action == "site.epsilon_total_set"]
    assert len(events) == 1 and events[0].actor == "privacy.officer"
    assert '"previous":"3"' in events[0].payload_json and "IRB 2026-11" in events[0].payload_json
    with pytest.raises(Exception, match="needs a reason"):
        site_policy.set_epsilon_total("6", actor="x", reason=" ", engine=engine)


def test_the_account_counts_per_patient_not_per_extract(db_url, extract):
    """Two ε=1 releases of disjoint halves leave every patient at 1, not 2."""
    engine = get_engine(db_url)
    half = extract.n_patients // 2
    first = _without_first(extract, half)
    second = Dataset(extract.patients.iloc[:half], extract.diagnoses[
        extract.diagnoses["patient_id"].isin(extract.patient_ids[:half])])
    _draw(engine, first)
    _draw(engine, second)
    spent = budget.account(_dp_run(engine, extract), DP, engine)
    assert spent is not None and spent.earlier == 1 and spent.releases == 2
    assert dict(spent.distribution) == {"2": extract.n_patients}


@pytest.mark.parametrize("shape", ["run", "comparison"])
def test_two_concurrent_requests_on_relabelled_patients_cannot_overspend(db_url, extract,
                                                                         monkeypatch, shape):
    engine = get_engine(db_url)
    site_policy.set_epsilon_total("1.5", actor="admin", reason="test", engine=engine)
    first = _dp_run(engine, extract)
    relabelled = _relabelled(extract)
    other = _dp_run(engine, relabelled) if shape == "run" else None
    requests = [lambda: budget.refuse_beyond_total(first, DP, engine),
                (lambda: budget.refuse_beyond_total(other, DP, engine)) if other else
                (lambda: budget.refuse_comparison_beyond_total(
                    "cmp-x", relabelled.fingerprint(), [{"epsilon": "1"}], DP, engine,
                    links=link_patients(relabelled, "default", KEY)))]
    assert race(monkeypatch, requests) == ["refused", "reserved"]


def test_linkage_keeps_no_value_and_needs_the_key(extract):
    """The hashes are keyed: another key gives unrelated hashes; nothing readable is kept."""
    a = link_patients(extract, "default", KEY)
    b = link_patients(extract, "default", bytes(32))
    assert overlap(a, b).shared == 0
    ids, contents = a.to_bytes()
    for p in extract.patient_ids[:10]:
        assert p.encode() not in ids + contents
    assert overlap(a, link_patients(_relabelled(extract), "default", KEY)).only_current == 0


def test_an_unregistered_source_is_refused_in_one_line(ehr_home):
    with pytest.raises(site_policy.UnknownSource, match="ehr-release source add ward-z"):
        site_policy.require_source("ward-z")
    assert site_policy.register_source("ward-z", actor="admin")
    assert site_policy.require_source("ward-z") == "ward-z"
    assert not site_policy.register_source("ward-z", actor="admin")
    pd.testing.assert_index_equal(pd.Index(site_policy.sources()),
                                  pd.Index(["default", "ward-z"]))


def test_the_datasheet_states_the_bound_not_the_linked_ε(db_url, extract, monkeypatch):
    """The recipient's line names this release's ε and the site's per-patient total; the
    most ε a patient actually carries (it depends on which patients earlier extracts held,
    i.e. on the true data) stays on the internal certificate."""
    from ehr_release.storage.engine import engine_or_default
    from ehr_release.tasks import certify

    engine = get_engine(db_url)
    monkeypatch.setattr("ehr_release.storage.budget._engine",
                        lambda e=None: engine_or_default(e or engine))
    site_policy.set_epsilon_total("5", actor="admin", reason="test", engine=engine)
    _draw(engine, extract, "1.5")
    later = _draw(engine, _relabelled(extract), "0.5")
    line = certify._cumulative_epsilon(later)
    assert line is not None and "spends ε = 0.5" in line and "at ε = 5" in line
    assert "2" not in line  # the linked sum (1.5 + 0.5) is not the recipient's to read
    internal = certify._epsilon_account(later)
    assert internal is not None and "with this release: 2 " in internal
