"""Issue 34 finding 5, last part: a table never lands on the page after its heading.

ArtUC's datasheet put the heading, description and facts of ``records.parquet`` at the foot of
page 3 and its field table on page 4; DiffGen's did the same with ``groups.csv``; LDA's
certificate split the two rows of "8. Audit trail" over two pages. The documents of one
release of each family (disassociation, ArtUC's (k, k^m), GCCens, LDA, DiffGen) are laid out
by WeasyPrint, the renderer that writes the PDFs, and the page of every heading and table
row is read from the laid-out boxes.
"""

from __future__ import annotations

from typing import Any

import pytest

from ehr_release.documents.certificate import render_certificate_html
from ehr_release.documents.datasheet import render_datasheet_html
from tests.test_certificate_layout import MIMIC, _release
from tests.test_document_tables import _boxes, _element_text

pytestmark = pytest.mark.skipif(not MIMIC.exists(), reason="MIMIC-III demo not available")

FAMILIES = ["disassociation", "artuc", "gccens", "lda", "diffgen"]
HEADINGS = {"h1", "h2", "h3", "h4"}


def _label(element: Any) -> str:
    return _element_text(element)[:50]


def _pages(html: str) -> tuple[Any, dict[Any, list[int]]]:
    """The parsed page and, for each element, the pages its boxes land on."""
    from weasyprint import HTML

    document = HTML(string=html)
    pages: dict[Any, list[int]] = {}
    for number, page in enumerate(document.render().pages, start=1):
        for box in _boxes(page._page_box):
            element = getattr(box, "element", None)
            if element is not None and number not in pages.setdefault(element, []):
                pages[element].append(number)
    return document.etree_element, pages


def separations(html: str) -> list[str]:
    """Every table whose first row is not on the page where its heading (or the table
    before it under the same heading) ends, and every table without a header row that
    runs over more than one page (its carried-over rows would have nothing naming them)."""
    root, pages = _pages(html)
    parent = {child: element for element in root.iter() for child in element}
    problems = []
    heading: Any = None
    anchor: Any = None
    for element in root.iter():
        if element.tag in HEADINGS:
            heading = anchor = element
            continue
        if element.tag != "table":
            continue
        rows = [r for r in element.iter("tr") if parent[r].tag != "thead"]
        if not rows:
            continue
        first = pages[rows[0]][0]
        if anchor is not None and pages[anchor][-1] != first:
            problems.append(f"[{_label(element)}] under [{_label(heading)}] starts on page "
                            f"{first}, after [{_label(anchor)}] on page {pages[anchor][-1]}")
        if element.find("thead") is None and pages[rows[-1]][-1] != first:
            problems.append(f"[{_label(element)}] has no header row and runs over pages "
                            f"{first}–{pages[rows[-1]][-1]}")
        anchor = element
    return problems


@pytest.mark.parametrize("name", FAMILIES)
def test_no_datasheet_table_starts_on_the_page_after_its_heading(name: str) -> None:
    _, sheet = _release(name)
    assert separations(render_datasheet_html(sheet)) == [], name


@pytest.mark.parametrize("name", FAMILIES)
def test_no_certificate_table_starts_on_the_page_after_its_heading(name: str) -> None:
    cert, _ = _release(name)
    assert separations(render_certificate_html(cert)) == [], name


def test_the_check_finds_an_orphaned_heading_and_a_split_table() -> None:
    """The measure can fail: a heading pushed to the foot of a page by a spacer, its table
    on the next page (the renderer's own default keeps a heading with what follows: turned
    off here), and a headless table of tall rows split over two pages."""
    spacer = "<div style='height:240mm'></div>"
    orphan = (f"<html><body>{spacer}<h3 style='break-after:auto'>fields</h3><table>"
              "<thead><tr><th>Field</th></tr></thead><tbody>" + "<tr><td>x</td></tr>" * 5
              + "</tbody></table></body></html>")
    assert any("starts on page 2" in p for p in separations(orphan))
    split = ("<html><body><div style='height:200mm'></div><table>"
             + "<tr><td style='height:20mm'>fact</td></tr>" * 4 + "</table></body></html>")
    assert any("no header row" in p for p in separations(split))
