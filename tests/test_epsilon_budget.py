"""Repeated DP releases of one extract compose: the extract's ε account and its site cap.

Each DiffGen release checks its own ledger against its own ε; nothing used to stop a steward
from publishing the same extract ten times at ε = 1 (ε = 10 together), or from drawing again
after a rejection until a draw looked good. The account sums the ε of every DP run on an
extract with the same fingerprint whose release was drawn (pinned for review); a site cap
(an audited site setting, default 3) refuses an approval, and a publish, beyond it.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from ehr_release.core.errors import ApprovalError, ConfigError, IllegalTransition
from ehr_release.storage import budget, runs, site_policy
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import DatasetRecord
from ehr_release.storage.runs import Status

AWAITING = [Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
            Status.AWAITING_APPROVAL]


def _run(engine, fingerprint="ab" * 32, algorithm="diffgen", epsilon="1", drawn=True):
    """A run of its own dataset row (each ingest adds one), awaiting the decision; its
    release drawn and pinned unless ``drawn`` is false (it failed before drawing)."""
    ds = DatasetRecord(fingerprint=fingerprint, rows=10, codes=30, columns_json="{}",
                       source="x")
    params = {"epsilon": epsilon, "h": "3", "taxonomies": "adult"} \
        if algorithm == "diffgen" else {"k": "2"}
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward",
                          algorithm=algorithm, parameters=params, out_dir="/tmp",
                          engine=engine)
    if not drawn:
        runs.fail_run(run.id, actor="flow", error="input refused", engine=engine)
        return run.id
    runs.pin_candidate(run.id, {"groups.csv": ("00" * 32, 1)}, engine)
    for status in AWAITING:
        runs.transition(run.id, status, actor="flow", engine=engine)
    return run.id


def _total(value, engine):
    """The site's ε total, changed the only way there is: an audited admin action."""
    site_policy.set_epsilon_total(value, actor="admin", reason="test", engine=engine)


def _approve(run_id, engine):
    return runs.decide(run_id, reviewer="rita", decision="approve", reason="ok",
                       engine=engine)


def test_account_sums_every_drawn_dp_run_of_the_same_extract(db_url):
    engine = get_engine(db_url)
    _total("100", engine)  # above the default (3): this test is about the sum
    dp = budget.dp_algorithm_names()
    assert "diffgen" in dp and "disassociation" not in dp
    first, second = _run(engine, epsilon="0.5"), _run(engine, epsilon="1")
    rejected = _run(engine, epsilon="4")
    _run(engine, epsilon="16", drawn=False)
    other_extract = _run(engine, fingerprint="cd" * 32, epsilon="8")
    not_dp = _run(engine, algorithm="code-counts")
    for run_id in (first, other_extract, not_dp):
        _approve(run_id, engine)
    runs.decide(rejected, reviewer="rita", decision="reject", reason="no", engine=engine)
    runs.transition(first, Status.PUBLISHED, actor="flow", engine=engine)
    spent = budget.account(second, dp, engine)
    assert spent is not None
    assert (spent.earlier, spent.releases, spent.published) == (Fraction(9, 2), 2,
                                                                Fraction(1, 2))
    assert spent.this_run == 1 and spent.after == Fraction(11, 2) and not spent.exceeded
    assert "5.5" in spent.text() and "site total ε = 100 per patient" in spent.text()
    assert budget.account(not_dp, dp, engine) is None


def test_approval_beyond_the_site_total_is_refused(db_url, monkeypatch):
    engine = get_engine(db_url)
    _total("1.5", engine)
    _approve(_run(engine, epsilon="1"), engine)
    _approve(_run(engine, epsilon="0.5"), engine)  # 1 + 0.5 = 1.5: at the cap, allowed
    third = _run(engine, epsilon="0.25")
    with pytest.raises(ApprovalError, match="exceed the ε budget"):
        _approve(third, engine)
    assert runs.get_run(third, engine).status == Status.AWAITING_APPROVAL
    runs.decide(third, reviewer="rita", decision="reject", reason="budget", engine=engine)


def test_publish_beyond_the_site_total_is_refused(any_db, monkeypatch):
    """An approval recorded before the cap was lowered still cannot publish past it."""
    from ehr_release.tasks.publish import publish_release

    engine = get_engine(any_db)
    first, second = _run(engine, epsilon="1"), _run(engine, epsilon="1")
    _approve(first, engine)
    _approve(second, engine)
    _total("1", engine)
    with pytest.raises(IllegalTransition, match="exceed the ε budget"):
        publish_release(second, {}, None, None, "flow")  # type: ignore[arg-type]


@pytest.mark.parametrize("raw", ["0", "-1", "abc", "1/0"])
def test_a_malformed_site_total_is_a_config_error(ehr_home, raw):
    with pytest.raises(ConfigError, match="the ε total must be a positive number"):
        site_policy.set_epsilon_total(raw, actor="admin", reason="test")
    assert budget.epsilon_total() == site_policy.DEFAULT_EPSILON_TOTAL


def test_the_reviewer_sees_the_account_on_the_certificate(any_db):
    from ehr_release.tasks.certify import _epsilon_account

    engine = get_engine(any_db)
    first, second = _run(engine, epsilon="0.5"), _run(engine, epsilon="1")
    _approve(first, engine)
    text = _epsilon_account(second)
    assert text is not None and "1 other differentially private run" in text
    assert "1.5" in text
    assert _epsilon_account(_run(engine, algorithm="code-counts")) is None


# --------------------------------------------------------------------------- comparisons
def _draw(engine, comparison, epsilon, fingerprint="ab" * 32, algorithm="diffgen"):
    """What a comparison's DP candidate records as it is drawn (flows/compare.py)."""
    budget.record_comparison_draw(comparison, fingerprint, 0, algorithm,
                                  {"epsilon": epsilon, "h": "2"}, engine)


def test_a_comparisons_dp_draws_count_on_the_account_of_a_later_run(db_url, monkeypatch):
    """The steward saw those candidates' utility (true data) and may pick ε and h from it:
    a choice among draws of the same records, which composes."""
    engine = get_engine(db_url)
    _draw(engine, "cmp-1", "0.5")
    _draw(engine, "cmp-1", "0.25")
    _draw(engine, "cmp-2", "1/8")
    _draw(engine, "cmp-3", "8", fingerprint="cd" * 32)  # another extract
    later = _run(engine, epsilon="1")
    spent = budget.account(later, budget.dp_algorithm_names(), engine)
    assert spent is not None
    # earlier: the most any patient carries, comparisons' draws included
    assert (spent.earlier, spent.compared, spent.compared_draws, spent.comparisons) == (
        Fraction(7, 8), Fraction(7, 8), 3, 2)
    assert spent.after == Fraction(15, 8)
    assert "3 DP candidates of 2 comparisons (0.875)" in spent.text()
    _total("1.5", engine)
    with pytest.raises(budget.EpsilonBudgetExhausted, match="site total ε = 1.5 per patient"):
        budget.refuse_beyond_total(later, budget.dp_algorithm_names(), engine)


def test_a_comparison_beyond_the_site_total_is_refused_as_a_whole(db_url, monkeypatch):
    """Each candidate would fit; together with what the extract spent, they do not."""
    engine = get_engine(db_url)
    dp = budget.dp_algorithm_names()
    _approve(_run(engine, epsilon="1"), engine)
    _total("2", engine)
    two = [{"epsilon": "0.5"}, {"epsilon": "0.75"}]
    with pytest.raises(budget.EpsilonBudgetExhausted,
                       match=r"comparison would exceed .* 2 DP candidates \(ε = 1.25\): 2.25"):
        budget.refuse_comparison_beyond_total("cmp-1", "ab" * 32, two, dp, engine)
    fits = budget.refuse_comparison_beyond_total("cmp-2", "ab" * 32, two[:1], dp, engine)
    assert fits is not None and fits.after == Fraction(3, 2) and not fits.exceeded
    assert budget.refuse_comparison_beyond_total("cmp-3", "ab" * 32, [], dp, engine) is None
