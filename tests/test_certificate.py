"""The certificate states the recorded facts, escapes user text and marks drafts."""

from __future__ import annotations

import dataclasses
import io
import shutil
import subprocess
from datetime import UTC, datetime

import matplotlib
import pytest

from ehr_release.documents.certificate import (
    ApprovalBlock,
    CertificateContext,
    render_certificate_html,
    render_certificate_pdf,
)
from ehr_release.documents.plain import format_number
from ehr_release.model.reports import Chart, Requirement, UtilityReport, VerificationReport
from ehr_release.planning.request import DataUse

matplotlib.use("Agg")


def _png() -> bytes:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(["a", "b"], [1, 2])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


@pytest.fixture
def ctx() -> CertificateContext:
    verification = VerificationReport("demo", [
        Requirement("k^m-anonymity", "every ≤2-itemset support ≥ 5", "smallest support 7", True),
    ])
    utility = UtilityReport("demo", {"ARE (W1)": 0.125, "records": 1000.0},
                            tables={"per constraint": [{"constraint": f"c{i}", "mre": i / 100}
                                                       for i in range(40)]},
                            charts=[Chart("hist", "MRE histogram", _png())])
    return CertificateContext(
        run_id="rel-" + "0" * 32, created_at=datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
        requester="steward-a", dataset_source="patients.csv", dataset_fingerprint="ab" * 32,
        dataset_rows=1000, dataset_schema={"age": "Int64", "codes": "multiset[icd9]"},
        algorithm="demo", algorithm_summary="a demo", privacy_model="k^m-anonymity",
        parameters={"k": 5, "policy": "<b>bold</b>", "seed": None},
        verification=verification, utility=utility,
        manifest=[("release.json", "cd" * 32, 4321)], approval=None,
        audit_head="ef" * 32, audit_events=12, status="verified — awaiting reviewer decision")


def test_draft_shows_every_fact_and_no_decision(ctx: CertificateContext) -> None:
    html = render_certificate_html(ctx)
    for fact in ("ab" * 32, "cd" * 32, "ef" * 32, "steward-a", "smallest support 7", "1,000",
                 "MRE histogram", "data:image/png;base64,", "First 25 of 40 rows"):
        assert fact in html, fact
    assert "DRAFT — not a release" in html and "Pending" in html


def test_user_text_is_escaped(ctx: CertificateContext) -> None:
    html = render_certificate_html(ctx)
    assert "<b>bold</b>" not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html


def test_final_certificate_names_the_reviewer_and_is_not_a_draft(
        ctx: CertificateContext) -> None:
    final = dataclasses.replace(ctx, status="approved — published", approval=ApprovalBlock(
        "reviewer-b", "approve", "IRB protocol 17", datetime(2026, 11, 22, 10, tzinfo=UTC)))
    html = render_certificate_html(final)
    assert "reviewer-b" in html and "IRB protocol 17" in html
    assert "DRAFT — not a release" not in html and "Pending" not in html


def test_failed_verification_is_shown_as_failed(ctx: CertificateContext) -> None:
    failing = dataclasses.replace(ctx, verification=VerificationReport("demo", [
        Requirement("k^m-anonymity", "support ≥ 5", "support 2 for {401.9}", False)]))
    html = render_certificate_html(failing)
    assert "FAILED" in html and "support 2 for {401.9}" in html


def test_pdf_renders_with_page_numbers(ctx: CertificateContext, tmp_path) -> None:
    pdf = render_certificate_pdf(ctx)
    assert pdf.startswith(b"%PDF")
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) not installed")
    path = tmp_path / "c.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "Release certificate" in text
    assert "Page 1 of" in text
    assert "steward-a" in text


def test_a_chart_is_drawn_when_the_algorithm_gives_none(ctx: CertificateContext) -> None:
    bare = dataclasses.replace(ctx, utility=UtilityReport("demo", {"ARE": 0.2, "n": 5000.0}))
    html = render_certificate_html(bare)
    assert "Utility figures reported for demo" in html
    assert "data:image/png;base64," in html


def test_first_page_states_recipient_terms_expiry_and_provenance(
        ctx: CertificateContext) -> None:
    use = DataUse(recipient="Dr. <i>Ada</i>", purpose="diabetes study", terms="no linkage",
                  expires="2027-12-31", comparison_id="cmp-" + "7" * 32, comparison_row=2)
    html = render_certificate_html(dataclasses.replace(ctx, data_use=use))
    first = html.split("</section>")[0]
    for fact in ("Dr. &lt;i&gt;Ada&lt;/i&gt;", "diabetes study", "no linkage", "2027-12-31",
                 "Chosen from comparison cmp-" + "7" * 32 + ", row 2", "commit "):
        assert fact in first, fact
    bare = render_certificate_html(ctx).split("</section>")[0]
    assert "no expiry stated in the request" in bare and "Requested directly" in bare


def test_long_terms_are_cut_on_the_first_page_and_whole_in_section_1(
        ctx: CertificateContext) -> None:
    terms = "clause " * 200 + "LAST-WORD"
    html = render_certificate_html(dataclasses.replace(ctx, data_use=DataUse(terms=terms)))
    first, rest = html.split("</section>", 1)
    assert "LAST-WORD" not in first and "full text in section 1" in first
    assert "LAST-WORD" in rest


def test_below_baseline_is_a_red_flag_on_the_first_page(ctx: CertificateContext) -> None:
    reason = "Classification accuracy (CA 53.9 %) is below always predicting the majority."
    poor = dataclasses.replace(ctx, utility=dataclasses.replace(ctx.utility,
                                                                below_baseline=[reason]))
    first = render_certificate_html(poor).split("</section>")[0]
    assert 'class="flag"' in first and reason in first and "POOR" in first
    assert 'class="flag"' not in render_certificate_html(ctx).split("</section>")[0]


def test_large_and_tiny_figures_are_written_without_exponents() -> None:
    assert format_number(174700.3) == "174,700"
    assert format_number(1.009e-8) == "1.009 × 10⁻⁸"
    assert format_number(0.99712) == "0.9971"
