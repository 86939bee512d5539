"""Issue 16: every algorithm's certificate and datasheet fit the page and read in plain words.

Each registered algorithm makes a small real release of the bundled MIMIC-III demo (100
patients: anonymize, verify, attack, evaluate — the same calls the flow makes), and its
certificate is laid out by WeasyPrint. The test walks the laid-out boxes of every page: no
table and no line of text may end right of the page's content box (ArtUC's 15-column
comparison table used to run past the margin and be cut). The first page must say, in
words, what is released, to whom, until when, the guarantee, and flag poor utility.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from typing import Any

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.documents.certificate import (
    CertificateContext,
    render_certificate_html,
    source_columns,
)
from ehr_release.documents.datasheet import DatasheetContext, describe_files, render_datasheet_html
from ehr_release.ingest import read_dataset
from ehr_release.model.reports import ReleaseOutcome, VerificationReport
from ehr_release.planning.request import DataUse
from ehr_release.tasks.certify import effective_parameters, parameter_help, released_columns
from tests.conftest import SHARED_DATA

MIMIC = SHARED_DATA / "mimic3-demo"
ARTUC_CONFIG = SHARED_DATA.parents[1] / "main" / "examples" / "artuc-mimic" / "config.yaml"
#: Small, quick parameters that publish on the demo (seeds: test mode only).
PARAMS: dict[str, dict[str, str]] = {
    "artuc": {"k": "5", "delta": "1", "compare": "true", "seed": "1"},
    "artuc-baseline": {"k": "5", "seed": "1"},
    "rmr": {"k": "5", "delta": "1", "seed": "1"},
    "artuc-unconstrained": {"k": "5", "delta": "1", "seed": "1"},
    "diffgen": {"epsilon": "1", "h": "5", "taxonomies": "mimic-demo", "eval_runs": "2",
                "seed": "1"},
    "disassociation": {"k": "5", "seed": "1"},
    "gccens": {"k": "5", "population": str(MIMIC)},
    "lda": {"k": "5"},
    "lda-baseline": {"k": "5"},
}
#: Long user text: it must wrap, not widen the page.
DATA_USE = DataUse(
    recipient="Dr. Ada Lovelace, Cohort Study 12, Department of Epidemiology and Biostatistics",
    purpose="Comorbidity patterns of diabetes and heart failure in ICU admissions " * 3,
    terms="No linkage with other sources; no re-identification attempts; " * 4,
    expires="2027-12-31", comparison_id="cmp-" + "5" * 32, comparison_row=3)
#: Slack for rounding in the layout (points).
TOLERANCE = 0.5

pytestmark = pytest.mark.skipif(not MIMIC.exists(), reason="MIMIC-III demo not available")


def _config() -> str:
    from pathlib import Path

    here = Path(__file__).resolve().parents[1] / "examples" / "artuc-mimic" / "config.yaml"
    return str(here if here.exists() else ARTUC_CONFIG)


@cache
def _dataset() -> Any:
    return read_dataset(MIMIC)


@cache
def _release(name: str) -> tuple[CertificateContext, DatasheetContext]:
    """One real release of the demo, with the certificate and datasheet contexts of it."""
    entry = registry.get(name)
    given = dict(PARAMS[name])
    if name in {"artuc", "artuc-baseline", "rmr", "artuc-unconstrained"}:
        given["config"] = _config()
    params = entry.parse(given)
    dataset = _dataset()
    rng = np.random.default_rng(0)
    files = entry.anonymize(dataset, params, rng)
    verification = entry.verify(files, dataset, params)
    assert entry.attack is not None and entry.count_records is not None
    attack = entry.attack(files, dataset, params)
    verification = VerificationReport(verification.algorithm,
                                      [*verification.requirements, attack.requirement()])
    utility = entry.evaluate(files, dataset, params, rng)
    outcome = ReleaseOutcome(records=entry.count_records(files), attack=attack,
                             waivers=[f"{r} The request allowed low utility "
                                      "(--allow-low-utility)." for r in utility.below_baseline])
    schema = dataset.schema()
    shown = effective_parameters(params, files)
    sha = "ab" * 32
    cert = CertificateContext(
        run_id="rel-" + "0" * 32, created_at=datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
        requester="steward.sam", dataset_source="mimic3-demo", dataset_fingerprint=sha,
        dataset_rows=dataset.n_patients, dataset_schema=schema, algorithm=entry.name,
        algorithm_summary=entry.summary, privacy_model=entry.privacy_model, parameters=shown,
        verification=verification, utility=utility,
        manifest=[(n, sha, len(d)) for n, d in sorted(files.items())], approval=None,
        audit_head=sha, audit_events=42, status="verified — awaiting reviewer decision",
        outcome=outcome, data_use=DATA_USE,
        destination="/srv/ehr_release/releases/a/rather/long/folder/name/that/must/wrap/"
                    "releases/rel-" + "0" * 32,
        released=describe_files(files, entry.schema),
        released_columns=released_columns(files, list(schema), entry.schema),
        parameter_help=parameter_help(entry), headline_loss=entry.headline_loss)
    sheet = DatasheetContext(
        run_id=cert.run_id, algorithm=entry.name, privacy_model=entry.privacy_model,
        parameters={k: v for k, v in shown.items() if k != "seed"},
        files=describe_files(files, entry.schema), records=outcome.records,
        checks_passed=[r.name for r in verification.requirements if r.passed],
        attacker_model=attack.attacker_model, data_use=DATA_USE, approved_at=None,
        audit_head=sha, parameter_help=parameter_help(entry))
    return cert, sheet


def _boxes(box: Any) -> Iterator[Any]:
    yield box
    for child in getattr(box, "children", None) or []:
        yield from _boxes(child)


@cache
def _layout(html: str) -> list[tuple[float, list[Any]]]:
    """Each page's content-box right edge and its laid-out boxes (margin boxes left out:
    the running header and page numbers sit in the margin by design).

    Kept per HTML text: several tests read the same document's pages, and a layout is
    about half a second of WeasyPrint; the boxes are only read."""
    from weasyprint import HTML

    pages = []
    for page in HTML(string=html).render().pages:
        box = page._page_box
        right = box.content_box_x() + box.width
        content = [b for child in box.children if type(child).__name__ != "MarginBox"
                   for b in _boxes(child)]
        pages.append((right, content))
    return pages


def _overflows(html: str) -> list[str]:
    """Every table and every line of text that ends right of its page's content box."""
    found = []
    for number, (right, boxes) in enumerate(_layout(html), start=1):
        for b in boxes:
            kind = type(b).__name__
            if kind not in {"TableBox", "TextBox", "ImageBox", "BlockReplacedBox",
                            "InlineReplacedBox"}:
                continue
            end = b.position_x + b.margin_width()
            if end > right + TOLERANCE:
                what = getattr(b, "text", "")[:40] or kind
                found.append(f"page {number}: {kind} {what!r} ends at {end:.1f} > {right:.1f}")
    return found


def _page_text(html: str, page: int) -> str:
    _, boxes = _layout(html)[page]
    return " ".join(b.text for b in boxes if type(b).__name__ == "TextBox")


@pytest.mark.parametrize("name", registry.names())
def test_every_certificate_fits_the_page(name: str) -> None:
    cert, _ = _release(name)
    html = render_certificate_html(cert)
    assert _overflows(html) == [], name


@pytest.mark.parametrize("name", registry.names())
def test_every_datasheet_fits_the_page(name: str) -> None:
    _, sheet = _release(name)
    assert _overflows(render_datasheet_html(sheet)) == [], name


def test_the_measure_finds_a_table_that_runs_off_the_page() -> None:
    """The check itself can fail: a wide auto-layout table is reported."""
    cells = "".join(f"<td>column_number_{i}_without_breaks</td>" for i in range(15))
    html = (f"<html><body><table style='table-layout:auto;width:auto'><tr>{cells}</tr>"
            "</table></body></html>")
    assert any("TableBox" in line for line in _overflows(html))


@pytest.mark.parametrize("name", registry.names())
def test_first_page_says_what_leaves_to_whom_and_how_good_it_is(name: str) -> None:
    cert, _ = _release(name)
    html = render_certificate_html(cert)
    first = _page_text(html, 0)
    for fact in ("In plain words", "What is released", "Dr. Ada Lovelace", "2027-12-31",
                 "cmp-" + "5" * 32, "row 3", "Guarantee", "Attack audit", "PASSED",
                 "ehr_release", "commit", *(f.name for f in cert.released)):
        assert fact in first, (name, fact)
    for reason in cert.utility.below_baseline:
        assert "Poor utility" in first and reason[:40] in first, name
    # Section 1 onwards starts on page 2: the first page is the summary alone.
    assert "1. Source dataset" not in first


@pytest.mark.parametrize("name", registry.names())
def test_a_test_site_says_so_on_page_one_and_the_summary_still_fits(name: str) -> None:
    """Issue 32 item 5: a test site's documents say TEST SITE on page 1 (and only theirs);
    the banner does not push a summary that fitted page 1 onto page 2."""
    cert, sheet = _release(name)
    for plain, test in ((render_certificate_html(cert),
                         render_certificate_html(dataclasses.replace(cert, test_site=True))),
                        (render_datasheet_html(sheet),
                         render_datasheet_html(dataclasses.replace(sheet, test_site=True)))):
        assert "TEST SITE" not in plain
        assert "TEST SITE" in _page_text(test, 0)
        if _page_text(plain, 1).lstrip().startswith("1. "):
            assert _page_text(test, 1).lstrip().startswith("1. "), name


@pytest.mark.parametrize("name", ["artuc", "disassociation", "lda", "diffgen"])
def test_no_exponent_and_no_pandas_type_reaches_the_reader(name: str) -> None:
    """Figures the certificate formats carry no ``e+05``; types are words, not dtypes.

    The verifier's and the attack's own sentences are quoted verbatim (their wording is
    theirs), so they are taken out before looking.
    """
    import html as html_lib
    import re

    cert, _ = _release(name)
    page = html_lib.unescape(render_certificate_html(cert))
    quoted = [t for r in cert.verification.requirements for t in (r.required, r.measured)]
    assert cert.outcome is not None and cert.outcome.attack is not None
    quoted += [cert.outcome.attack.measured, cert.outcome.attack.attacker_model]
    for text in sorted(filter(None, quoted), key=len, reverse=True):
        page = page.replace(text, "")
    page = re.sub(r"data:image/png;base64,[^\"]*", "", page)
    assert not re.findall(r"\d\.?\d*e[+-]\d", page), name
    columns = {kind for _, kind, _ in source_columns(cert)}
    assert not columns & {"object", "Int64", "float64", "int64", "multiset[icd9]",
                          "multiset[icd9]+age"}, columns
    assert {"text", "whole number"} <= columns, columns


def test_useless_releases_are_flagged_on_the_first_page() -> None:
    """The demo's LDA (AvgRE ≈ 1) and DiffGen (CA below always guessing the majority)."""
    for name, words in (("lda", "AvgRE"), ("diffgen", "majority class")):
        cert, _ = _release(name)
        assert cert.utility.below_baseline, name
        first = _page_text(render_certificate_html(cert), 0)
        assert "Poor utility" in first and words in first and "POOR" in first, name


def test_diffgen_class_column_shows_the_column_used() -> None:
    cert, sheet = _release("diffgen")
    assert cert.parameters["class_column"] == "in_hospital_death (the configuration's)"
    assert "in_hospital_death" in render_certificate_html(cert)
    assert "in_hospital_death" in render_datasheet_html(sheet)


def test_artuc_comparison_is_split_into_column_groups_not_turned() -> None:
    """Issue 34: turned on its side, a table's header row held its first column's values
    and could part from its rows; column groups each repeat the label column instead."""
    cert, _ = _release("artuc")
    html = render_certificate_html(cert)
    assert "on its side" not in html
    assert "<thead><tr><th>algorithm</th><th>NCP</th><th>UL</th>" in html
    assert html.count("<th>algorithm</th>") == 3  # 14 figures in groups of 5


def test_codes_only_release_says_demographics_are_not_released() -> None:
    cert, _ = _release("disassociation")
    html = render_certificate_html(cert)
    rows = {name: released for name, _, released in source_columns(cert)}
    assert rows["gender"] == "no" and rows["ethnicity"] == "no"
    assert rows["codes"] == "yes, in release.parquet"  # one code per row, column 'code'
    # The codes leave in the release's own form (one per row of column 'code'), not by name.
    assert "Source columns in it, in the algorithm's own form: codes." in html


def test_an_artuc_release_says_its_codes_are_released() -> None:
    """The records table carries generalized-code ids, not a column named like the source's:
    its declaration names that column, so the certificate does not say 'no'."""
    cert, _ = _release("artuc")
    rows = {name: released for name, _, released in source_columns(cert)}
    assert rows["codes"] == "yes, in generalized_codes.parquet, records.parquet"


def test_the_comparison_report_fits_the_page() -> None:
    """The comparison shares the stylesheet: its candidate table must fit as well."""
    from ehr_release.comparison.compare import Candidate, Outcome
    from ehr_release.comparison.comparison_report import ComparisonContext, render_comparison_html

    params = {"config": "/srv/ehr_release/examples/artuc-mimic/config-with-a-long-name.yaml",
              "delta": "0.04", "epsilon": "6%", "compare": "true"}
    outcomes = [Outcome(Candidate(i, "artuc", {**params, "k": str(k)}), i % 2 == 0,
                        "ARE W3", 2.494 + i) for i, k in enumerate((5, 10, 25, 50))]
    ctx = ComparisonContext(
        comparison_id="cmp-" + "5" * 32, requester="steward.sam",
        created_at=datetime(2026, 11, 22, tzinfo=UTC), dataset_source="mimic3-demo",
        dataset_rows=100, dataset_fingerprint="ab" * 32, axis="k", outcomes=outcomes,
        recommended=outcomes[0], reasons=["row 1 did not verify"], requirements=[],
        max_loss=None)
    assert _overflows(render_comparison_html(ctx)) == []


@pytest.mark.parametrize("name", ["artuc", "disassociation", "diffgen"])
def test_utility_reads_in_words_on_page_one_and_in_full_in_the_appendix(name: str) -> None:
    """Issue 34 finding 7: page 1 reads the key measures out, each with what it is and what
    good and bad look like; shares print as percentages; every figure and table is in
    Appendix A, after the record."""
    import html as html_lib

    from ehr_release.documents.measures import key_measures, measure, shown_value

    cert, _ = _release(name)
    html = render_certificate_html(cert)
    first = " ".join(_page_text(html, 0).split()).replace("- ", "-")  # undo hyphen breaks
    keys = key_measures(name, cert.utility.metrics, cert.headline_loss)
    assert keys, name
    for key in keys:
        m = measure(name, key)
        assert m is not None
        shown = shown_value(name, key, cert.utility.metrics[key])
        assert f"{key} {shown} — {m.words}" in first, (name, key)
        assert m.scale.split(";")[0] in first, (name, key)
    page = html_lib.unescape(html)
    appendix = page[page.index("Appendix A. All utility figures"):]
    for key, value in cert.utility.metrics.items():
        assert f"<td>{key}</td><td class=\"num\">{shown_value(name, key, value)}</td>" \
            in appendix, key
    for key, value in cert.utility.metrics.items():
        m = measure(name, key)
        if m is not None and m.kind == "share" and isinstance(value, float):
            assert shown_value(name, key, value).endswith(" %"), key
    for table in cert.utility.tables:
        assert f"<h3>{table}" in appendix, table
