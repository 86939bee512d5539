"""The ε check before a draw and the record of it are one step (storage/budget.py).

Before: two runs (or a run and a comparison) on one extract started at the same moment could
both pass the site total's check and both draw, beyond the total. Now the check takes the
audit chain's lock and reserves the ε (``epsilon.reserved``) in the same transaction; the
account counts a reservation once, whether or not the draw it covers was recorded since.
Storage tests: SQLite and PostgreSQL (``db_url``).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from ehr_release.storage import budget, runs, site_policy
from ehr_release.storage.audit import iter_events, verify_chain
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import DatasetRecord
from tests.reservation_race import race

FINGERPRINT = "ab" * 32
DP = budget.dp_algorithm_names()


def _requested(engine, epsilon: str) -> str:
    """A DiffGen run on the extract, requested, nothing drawn yet."""
    ds = DatasetRecord(fingerprint=FINGERPRINT, rows=10, codes=30, columns_json="{}",
                       source="x")
    return runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward",
                           algorithm="diffgen",
                           parameters={"epsilon": epsilon, "h": "3", "taxonomies": "adult"},
                           out_dir="/tmp", engine=engine).id


def _reserved_events(engine) -> list[str]:
    return [e.action for e in iter_events(engine=engine) if e.action == "epsilon.reserved"]


@pytest.mark.parametrize("second", ["run", "comparison"])
def test_simultaneous_requests_that_fit_only_one_reserve_exactly_one(db_url, monkeypatch,
                                                                     second):
    """Each request alone fits the total, both do not: exactly one goes on to draw. The
    account's read is slowed so that, were check and reservation two steps, both would
    read before either wrote."""
    engine = get_engine(db_url)
    site_policy.set_epsilon_total("1.5", actor="admin", reason="test", engine=engine)
    first = _requested(engine, "1")
    other = _requested(engine, "1") if second == "run" else None
    requests = [lambda: budget.refuse_beyond_total(first, DP, engine),
                (lambda: budget.refuse_beyond_total(other, DP, engine)) if other else
                (lambda: budget.refuse_comparison_beyond_total(
                    "cmp-1", FINGERPRINT, [{"epsilon": "1"}], DP, engine))]
    assert race(monkeypatch, requests) == ["refused", "reserved"]
    assert len(_reserved_events(engine)) == 1 and verify_chain(engine).ok
    later = budget.account(_requested(engine, "0.5"), DP, engine)
    assert later is not None and later.earlier == 1  # the winner, once


def test_a_reservation_and_the_draw_it_covers_count_once(db_url):
    engine = get_engine(db_url)
    run_id = _requested(engine, "1")
    budget.refuse_beyond_total(run_id, DP, engine)
    budget.refuse_beyond_total(run_id, DP, engine)  # a resumed run: still one reservation
    budget.refuse_comparison_beyond_total("cmp-1", FINGERPRINT,
                                          [{"epsilon": "0.25"}, {"epsilon": "0.5"}], DP,
                                          engine)
    observer = _requested(engine, "2")

    def seen():
        spent = budget.account(observer, DP, engine)
        assert spent is not None
        return (spent.earlier, spent.releases, spent.compared, spent.compared_draws,
                spent.comparisons)

    # earlier: the most any patient carries (the run's 1 and the comparison's 3/4)
    reserved = (Fraction(7, 4), 1, Fraction(3, 4), 2, 1)
    assert seen() == reserved  # reserved, nothing drawn yet
    runs.pin_candidate(run_id, {"groups.csv": ("00" * 32, 1)}, engine)
    budget.record_comparison_draw("cmp-1", FINGERPRINT, 0, "diffgen", {"epsilon": "0.25"},
                                  engine)
    assert seen() == reserved  # one candidate drawn of two: the reservation covers both
    budget.record_comparison_draw("cmp-1", FINGERPRINT, 1, "diffgen", {"epsilon": "0.5"},
                                  engine)
    assert seen() == reserved  # all drawn: still once
    assert len(_reserved_events(engine)) == 2 and verify_chain(engine).ok
    own = budget.account(run_id, DP, engine)
    # its own reservation is not "earlier": only the comparison's
    assert own is not None and own.earlier == Fraction(3, 4)


def test_a_failed_run_gives_its_reservation_back_only_if_nothing_was_drawn(db_url):
    engine = get_engine(db_url)
    site_policy.set_epsilon_total("100", actor="admin", reason="test", engine=engine)
    undrawn, drawn, running = (_requested(engine, e) for e in ("4", "2", "1"))
    for run_id in (undrawn, drawn, running):
        budget.refuse_beyond_total(run_id, DP, engine)
    runs.pin_candidate(drawn, {"groups.csv": ("00" * 32, 1)}, engine)
    for run_id in (undrawn, drawn):
        runs.fail_run(run_id, actor="flow", error="stopped", engine=engine)
    assert budget.release_undrawn(undrawn, engine)
    assert not budget.release_undrawn(undrawn, engine)  # given back once
    assert not budget.release_undrawn(drawn, engine)  # its draw was seen: it counts
    assert not budget.release_undrawn(running, engine)  # not failed: it may yet draw
    spent = budget.account(_requested(engine, "1"), DP, engine)
    assert spent is not None and (spent.earlier, spent.releases) == (Fraction(3), 2)
    assert verify_chain(engine).ok
