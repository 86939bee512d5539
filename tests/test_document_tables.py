"""Issue 34 finding 5: no table in the certificate, the datasheet or the comparison report
is turned on its side or split from its header.

ArtUC's 15-column comparison, disassociation's "ARE W2 by query size" and "re-identification
risk by known codes" used to be printed on their side: the header row held numbers (the
query sizes) and the row naming the columns could land on the next page; the comparison
report's "Row" header was broken inside the word ("Ro/w"). The documents are rendered with
WeasyPrint (the renderer that writes the PDFs) and with poppler's ``pdftotext`` on the PDF
bytes, and every table fragment on every page is checked.
"""

from __future__ import annotations

import dataclasses
import html as html_lib
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ehr_release.documents.certificate import fit_table, render_certificate_html
from ehr_release.documents.datasheet import render_datasheet_html
from ehr_release.model.reports import UtilityReport
from tests.test_certificate_layout import MIMIC, _release

pytestmark = pytest.mark.skipif(not MIMIC.exists(), reason="MIMIC-III demo not available")

NUMBER = re.compile(r"^[−-]?[\d,.]+( %)?$")


def _boxes(box: Any) -> Iterator[Any]:
    yield box
    for child in getattr(box, "children", None) or []:
        yield from _boxes(child)


def _text(box: Any) -> str:
    return " ".join(b.text for b in _boxes(box) if type(b).__name__ == "TextBox")


def _element_text(element: Any) -> str:
    return " ".join(" ".join(element.itertext()).split())


def _joined(text: str) -> str:
    """Laid-out text with its line breaks undone: a break after a hyphen ("artuc-" /
    "baseline") is where the word may break; any other break inside a word stays visible."""
    return " ".join(text.split()).replace("- ", "-")


def table_fragments(html: str) -> list[tuple[int, Any, list[Any]]]:
    """(page number, table element, the fragment's row groups) for every piece of every
    table with a header row, on every page it runs onto."""
    from weasyprint import HTML

    out = []
    for number, page in enumerate(HTML(string=html).render().pages, start=1):
        for box in _boxes(page._page_box):
            if type(box).__name__ != "TableBox":
                continue
            element = box.element
            if element is None or element.find("thead") is None:
                continue
            out.append((number, element, list(box.children)))
    return out


def header_problems(html: str) -> list[str]:
    """Every table piece with body rows but no header row, or whose header is not the
    table's own; every header line holding a broken word; every header cell that is a bare
    number (a table turned on its side puts its first column's values there)."""
    problems = []
    for page, element, groups in table_fragments(html):
        thead = element.find("thead")
        wanted = _element_text(thead)
        headers = [g for g in groups if getattr(g, "is_header", False)]
        body_rows = sum(len(g.children) for g in groups if not getattr(g, "is_header", False))
        if body_rows and not headers:
            problems.append(f"page {page}: {body_rows} rows of [{wanted[:60]}] without header")
            continue
        for header in headers:
            if _joined(_text(header)) != wanted:
                problems.append(f"page {page}: header {_text(header)!r} is not {wanted!r}")
            for cell in _boxes(header):
                if type(cell).__name__ != "TableCellBox":
                    continue
                words = set(_element_text(cell.element).split())
                if NUMBER.match(_element_text(cell.element)):
                    problems.append(f"page {page}: header cell is a number: "
                                    f"{_element_text(cell.element)!r}")
                lines = [_text(b) for b in _boxes(cell) if type(b).__name__ == "LineBox"]
                broken = [w for w in _joined(" ".join(lines)).split() if w not in words]
                if broken:
                    problems.append(f"page {page}: header word broken: {broken}")
    return problems


def _squeezed(text: str) -> str:
    """Text without spaces and hyphens: pdftotext drops the hyphen of a word broken at one."""
    return "".join(text.split()).replace("-", "")


def _is_title(line: str, table: str, part: str) -> bool:
    """The line is the table's (or its column group's) heading."""
    line = line.strip()
    return line.startswith(f"{table} ({part}") if part else line == table


def _pdf_pages_text(pdf: bytes, tmp_path: Path) -> list[str]:
    path = tmp_path / "doc.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout
    return text.split("\f")


@pytest.mark.parametrize("name", ["artuc", "disassociation"])
def test_every_certificate_table_keeps_its_header_on_every_page(name: str) -> None:
    cert, sheet = _release(name)
    assert header_problems(render_certificate_html(cert)) == []
    assert header_problems(render_datasheet_html(sheet)) == []


@pytest.mark.parametrize(("name", "table"), [
    ("artuc", "comparison"), ("disassociation", "ARE W2 by query size"),
    ("disassociation", "re-identification risk by known codes")])
def test_the_wide_tables_are_column_groups_that_repeat_the_label_column(
        name: str, table: str) -> None:
    """The tables the issue names: never turned, each column group starts with the
    table's label column and its headers are the table's own column names."""
    cert, _ = _release(name)
    rows = cert.utility.tables[table]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    parts = fit_table(table, rows, name)
    assert [c for p in parts for c in p.header[1:]] == columns[1:]
    assert all(p.header[0] == columns[0] for p in parts)
    assert all(len(p.rows) == len(rows[:25]) for p in parts)
    html = render_certificate_html(cert)
    assert "on its side" not in html and "rotate(" not in html.split("</style>")[1]
    page = html_lib.unescape(html)
    for part in parts:
        head = "".join(f"<th>{c}</th>" for c in part.header)
        assert f"<thead><tr>{head}</tr></thead>" in page, part.header


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler not installed")
@pytest.mark.parametrize("name", ["artuc", "disassociation"])
def test_in_the_pdf_every_page_with_a_tables_rows_shows_its_header(name: str,
                                                                   tmp_path: Path) -> None:
    """On the PDF itself: every page from a utility table's title to its last row's label
    also shows every word of that table's (column group's) header."""
    from ehr_release.documents.certificate import render_certificate_pdf

    cert, _ = _release(name)
    pages = _pdf_pages_text(render_certificate_pdf(cert), tmp_path)
    appendix = next(i for i, p in enumerate(pages) if "Appendix A. All utility" in p)
    for table, rows in cert.utility.tables.items():
        for part in fit_table(table, rows, name):
            start = next(i for i in range(appendix, len(pages))
                         if any(_is_title(line, table, part.part)
                                for line in pages[i].splitlines()))
            label = part.rows[-1][0]
            end = next(i for i in range(start, len(pages))
                       if _squeezed(label) in _squeezed(pages[i]))
            for i in range(start, end + 1):
                tokens = set(pages[i].replace("-", "").split())
                missing = {w.replace("-", "") for c in part.header for w in c.split()} - tokens
                assert not missing, (table, part.part, i + 1, missing)


def test_a_table_running_onto_the_next_page_repeats_its_header() -> None:
    """25 tall rows cannot fit one page: every page they reach shows the header row."""
    cert, _ = _release("disassociation")
    rows = [{"constraint": f"u{i}", "codes": " ".join(f"{400 + j}.{i}" for j in range(60)),
             "MRE %": float(i)} for i in range(25)]
    utility = dataclasses.replace(cert.utility, tables={"tall": rows})
    html = render_certificate_html(dataclasses.replace(cert, utility=utility))
    pages = {page for page, element, _ in table_fragments(html)
             if "u24" in _element_text(element) and "u0" in _element_text(element)}
    assert len(pages) >= 2
    assert header_problems(html) == []


def test_the_check_finds_a_turned_table_and_a_broken_header_word() -> None:
    """The measure can fail: a header of numbers and a header word broken by a narrow
    column are reported."""
    turned = ("<html><body><table><thead><tr><th>measure</th><th>1</th><th>2</th></tr></thead>"
              "<tbody><tr><td>ARE</td><td>0.1</td><td>0.2</td></tr></tbody></table></body></html>")
    assert any("number" in p for p in header_problems(turned))
    narrow = ("<html><head><style>th { overflow-wrap: anywhere; }</style></head><body>"
              "<table style='width:20pt;table-layout:fixed'><thead><tr><th>Row</th></tr>"
              "</thead><tbody><tr><td>1</td></tr></tbody></table></body></html>")
    assert any("broken" in p for p in header_problems(narrow))


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler not installed")
def test_the_comparison_report_headers_are_whole_words(tmp_path: Path) -> None:
    from ehr_release.comparison.compare import Candidate, Outcome
    from ehr_release.comparison.comparison_report import (
        ComparisonContext,
        render_comparison_html,
        render_comparison_pdf,
    )

    params = {"config": "/srv/ehr_release/examples/artuc-mimic/config-with-a-long-name.yaml",
              "delta": "0.04", "epsilon": "6%", "compare": "true"}
    outcomes = [Outcome(Candidate(i, "artuc", {**params, "k": str(k)}), i % 2 == 0,
                        "ARE W3", 2.494 + i) for i, k in enumerate((5, 10, 25, 50), start=1)]
    ctx = ComparisonContext(
        comparison_id="cmp-" + "5" * 32, requester="steward.sam",
        created_at=datetime(2026, 11, 22, tzinfo=UTC), dataset_source="mimic3-demo",
        dataset_rows=100, dataset_fingerprint="ab" * 32, axis="k", outcomes=outcomes,
        recommended=outcomes[0], reasons=[], requirements=[], max_loss=None)
    assert header_problems(render_comparison_html(ctx)) == []
    text = "\n".join(_pdf_pages_text(render_comparison_pdf(ctx), tmp_path))
    header = text[text.index("Candidates"):]
    for word in ("Row", "Algorithm", "Parameters", "Verified", "Loss"):
        assert re.search(rf"(^|\s){word}(\s|$)", header), word


def test_utility_tables_keep_their_figures_in_words() -> None:
    """Splitting keeps every figure: each column group holds the label and its columns'
    figures, shares as percentages like everywhere else."""
    report = UtilityReport("artuc", {}, {"comparison": [
        {"algorithm": "artuc", **{f"m{i}": float(i) for i in range(12)},
         "records satisfying the utility constraints": 0.5}]})
    parts = fit_table("comparison", report.tables["comparison"], "artuc")
    assert [p.part for p in parts] == ["columns 1–4 of 13", "columns 5–9 of 13",
                                       "columns 10–13 of 13"]
    assert parts[-1].rows[0][-1] == "50 %" and parts[-1].rows[0][0] == "artuc"
