"""Issue 37 goal 3: the final certificate of a publication is rendered on the second CPU
while the publishing flow starts — the same bytes as in place, or none at all."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from ehr_release.documents.certificate import CertificateContext, render_certificate_pdf
from ehr_release.model.reports import Requirement, UtilityReport, VerificationReport
from ehr_release.tasks import render_aside

RUN = "rel-" + "1" * 32


@pytest.fixture(autouse=True)
def _stopped() -> Iterator[None]:
    yield
    render_aside.stop_renderer()


def _ctx() -> CertificateContext:
    return CertificateContext(
        run_id=RUN, created_at=datetime(2026, 11, 28, 9, 30, tzinfo=UTC),
        requester="steward-a", dataset_source="patients.csv", dataset_fingerprint="ab" * 32,
        dataset_rows=1000, dataset_schema={"age": "Int64", "codes": "multiset[icd9]"},
        algorithm="demo", algorithm_summary="a demo", privacy_model="k^m-anonymity",
        parameters={"k": 5}, utility=UtilityReport("demo", {"records": 1000.0}),
        verification=VerificationReport("demo", [Requirement("k", "≥ 5", "7", True)]),
        manifest=[("release.json", "cd" * 32, 4321)], approval=None, audit_head="ef" * 32,
        audit_events=12, status="approved — published")


def test_the_certificate_rendered_aside_has_the_same_bytes(monkeypatch, cpu_free) -> None:
    monkeypatch.setattr("ehr_release.runtime.cpus.usable_cpus", lambda: 2)
    ctx = _ctx()
    assert render_aside.start_renderer()
    assert render_aside.take(RUN) is None  # nothing handed over yet: render in place
    assert render_aside.begin(RUN, ctx)
    assert not render_aside.begin(RUN, ctx)  # one job at a time
    assert render_aside.take("rel-other") is None  # not that run's
    assert render_aside.take(RUN) == render_certificate_pdf(ctx)
    assert not render_aside.begin(RUN, ctx)  # it served its one publication and ended


def test_no_renderer_on_one_cpu_or_a_busy_one_and_a_lost_one_leaves_the_work_in_place(
        monkeypatch) -> None:
    from ehr_release.tasks import aside

    monkeypatch.setattr("ehr_release.runtime.cpus.usable_cpus", lambda: 1)
    monkeypatch.setattr(aside, "_cpu_free", lambda: True)
    assert not render_aside.start_renderer()
    assert not render_aside.begin(RUN, _ctx())
    monkeypatch.setattr("ehr_release.runtime.cpus.usable_cpus", lambda: 2)
    monkeypatch.setattr(aside, "_cpu_free", lambda: False)  # another program on the CPU
    assert not render_aside.start_renderer()
    monkeypatch.setattr(aside, "_cpu_free", lambda: True)
    assert render_aside.start_renderer()
    render_aside._renderer[0].terminate()
    render_aside._renderer[0].join(5)
    assert not render_aside.begin(RUN, _ctx()) and render_aside.take(RUN) is None
