"""Issue 34 finding 8: the datasheet gives the researcher a record-per-row frame.

Every family makes a real release of the bundled MIMIC-III demo; the "Load it" code printed
on its datasheet is taken out of the rendered page and run in a folder holding the released
files, and must give the frame :func:`ehr_release.reading.load_release` gives — one row per
record (DiffGen: per released group, its noisy count as weight). The disassociation
reconstruction is checked against the published chunks; the field table lists a shared
review once, and parameter meanings carry no paper step numbers.
"""

from __future__ import annotations

import html as html_lib
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ehr_release import registry
from ehr_release.documents.datasheet import (
    DatasheetContext,
    describe_files,
    field_groups,
    render_datasheet_html,
    researcher_help,
)
from ehr_release.planning.request import DataUse
from ehr_release.reading import load_release, snippet
from ehr_release.tasks.certify import parameter_help
from tests.test_certificate_layout import MIMIC, PARAMS, _config, _dataset

pytestmark = pytest.mark.skipif(not MIMIC.exists(), reason="MIMIC-III demo not available")

FAMILIES = ["disassociation", "artuc", "diffgen", "gccens", "lda"]


@cache
def _files(name: str) -> dict[str, bytes]:
    entry = registry.get(name)
    given = dict(PARAMS[name])
    if name == "artuc":
        given["config"] = _config()
        given["compare"] = "false"
    return entry.anonymize(_dataset(), entry.parse(given), np.random.default_rng(0))


def _sheet(name: str) -> DatasheetContext:
    entry = registry.get(name)
    files = _files(name)
    return DatasheetContext(
        run_id="rel-" + "0" * 32, algorithm=name, privacy_model=entry.privacy_model,
        parameters={}, files=describe_files(files, entry.schema),
        records=entry.count_records(files) if entry.count_records else None,
        checks_passed=["closed world"], attacker_model=None, data_use=DataUse(),
        approved_at=None, audit_head="ab" * 32, parameter_help=parameter_help(entry))


def _folder(name: str, tmp_path: Path) -> Path:
    for file, data in _files(name).items():
        (tmp_path / file).write_bytes(data)
    return tmp_path


def printed_snippet(html: str) -> str:
    """The code under "Load it", as the page shows it."""
    found = re.search(r'<pre class="load-it">(.*?)</pre>', html, re.S)
    assert found, "no Load it code on the datasheet"
    return html_lib.unescape(found.group(1))


@pytest.mark.parametrize("name", FAMILIES)
def test_the_datasheets_load_it_code_gives_one_record_per_row(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sheet = _sheet(name)
    html = render_datasheet_html(sheet)
    assert "1. Load it: one record per row" in html
    code = printed_snippet(html)
    folder = _folder(name, tmp_path)
    monkeypatch.chdir(folder)
    scope: dict[str, Any] = {}
    # As a researcher runs it: no future import or name of this module leaks in.
    exec(compile(code, "datasheet-snippet", "exec", dont_inherit=True), scope)  # noqa: S102
    records = scope["records"]
    pd.testing.assert_frame_equal(records, load_release(folder))
    assert isinstance(records, pd.DataFrame) and len(records) > 0
    if name == "diffgen":
        assert records["weight"].sum() == sheet.records
    else:
        assert len(records) == sheet.records, name
    # No column holds a [low, high] pair: numbers are numbers.
    for column in records.columns:
        first = records[column].iloc[0]
        assert not (isinstance(first, list | tuple | np.ndarray) and len(first) == 2
                    and all(isinstance(v, int | float | np.number) for v in first)), column


def test_the_snippet_is_the_packages_own_reader() -> None:
    """One source of truth: the printed code is the reader's source, not a copy."""
    from ehr_release.reading import loaders

    code = snippet({"records.parquet", "generalized_codes.parquet"})
    assert code is not None and "def load_kkm(" in code
    import inspect

    assert inspect.getsource(loaders.load_kkm) in code
    assert snippet({"something.else"}) is None


def test_a_folder_without_a_known_release_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no release"):
        load_release(tmp_path)


def _published_chunks(rows: pd.DataFrame) -> dict[tuple[str, int], Counter]:
    out: dict[tuple[str, int], Counter] = {}
    for (group, chunk), part in rows[rows["chunk"] > 0].groupby(["group", "chunk"]):
        subs = part.groupby("subrecord")["code"].agg(lambda c: tuple(sorted(c.dropna())))
        out[(group, int(chunk))] = Counter(subs)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_the_reconstruction_is_consistent_with_every_published_chunk(
        seed: int, tmp_path: Path) -> None:
    """Projected on each record or shared chunk's codes, the reconstructed records of its
    cluster (or joint cluster) give back exactly the published subrecords; each cluster has
    its size in records, and every item-chunk code is held by one of its records."""
    folder = _folder("disassociation", tmp_path)
    rows = pd.read_parquet(folder / "release.parquet")
    records = load_release(folder, seed=seed)
    clusters = rows[rows["group"].str.startswith("P")].drop_duplicates("group")
    assert list(records["cluster"].drop_duplicates()) == list(clusters["group"])
    assert len(records) == int(clusters["size"].sum())
    members = {g: list(clusters.loc[clusters["joint"] == g, "group"])
               for g in rows.loc[rows["group"].str.startswith("J"), "group"].unique()}
    for (group, _), published in _published_chunks(rows).items():
        holders = records[records["cluster"].isin(members.get(group, [group]))]
        domain = {c for sub in published for c in sub}
        got = Counter(tuple(sorted(set(r) & domain)) for r in holders["codes"])
        assert got == published, group
    items = rows[(rows["chunk"] == 0) & rows["code"].notna()]
    for group, part in items.groupby("group"):
        held = records.loc[records["cluster"] == group, "codes"]
        for code in part["code"]:
            assert sum(code in r for r in held) == 1, (group, code)
    if seed == 1:
        assert not load_release(folder, seed=0)["codes"].equals(records["codes"])


def test_artuc_is_joined_with_intervals_as_two_numeric_columns(tmp_path: Path) -> None:
    folder = _folder("artuc", tmp_path)
    records = load_release(folder)
    groups = pd.read_parquet(folder / "generalized_codes.parquet")
    assert {"age_lo", "age_hi"} <= set(records.columns) and "age" not in records.columns
    assert records["age_lo"].dtype.kind == "f" and (records["age_lo"] <= records["age_hi"]).all()
    raw = pd.read_parquet(folder / "records.parquet")
    for ids, codes in zip(raw["generalized_codes"], records["codes"], strict=True):
        assert codes == [list(groups.loc[groups["id"] == i, "codes"].iloc[0]) for i in ids]


def test_diffgen_groups_carry_their_noisy_count_as_weight(tmp_path: Path) -> None:
    folder = _folder("diffgen", tmp_path)
    records = load_release(folder)
    raw = pd.read_csv(folder / "groups.csv")
    assert list(records["weight"]) == list(raw["count"])
    assert {"age_lo", "age_hi"} <= set(records.columns)
    assert records["age_lo"].dtype.kind in "if"


def test_the_field_table_lists_a_shared_review_once() -> None:
    """DiffGen's predictors share one review: one row names them all (it was one row, and
    one copy of the paragraph, per column)."""
    sheet = _sheet("diffgen")
    groups_file = next(f for f in sheet.files if f.name.startswith("groups."))
    reviews = Counter(r.review for r in groups_file.fields)
    shared = max(reviews.values())
    assert shared >= 5
    grouped = field_groups(groups_file.fields)
    assert len({g.review for g in grouped}) == len(grouped)
    html = render_datasheet_html(sheet)
    for review in reviews:
        assert html.count(html_lib.escape(review, quote=False)[:80]) <= 1


def test_parameter_meanings_on_the_datasheet_quote_no_paper_steps() -> None:
    sheet = _sheet("artuc")
    help_texts = sheet.parameter_help
    assert any(re.search(r"Step|§", t) for t in help_texts.values())  # the input has them
    for name, text in help_texts.items():
        brief = researcher_help(text)
        assert not re.search(r"\bSteps? \d|§|\(Def\.", brief), (name, brief)
        assert len(brief) <= 142, (name, brief)
