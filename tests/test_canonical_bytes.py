"""A JSON release file must be exactly its declared rendering (privacy/canonical_bytes.py).

Found by attacking the bytes: a GCCens release whose lines listed codes in another order
than sorted (e.g. the order they were recorded), or spaced some lines differently, passed
the closed world, the verifier and the attack audit, although the format promised "codes
are sorted, so key order carries nothing".
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ehr_release.privacy.canonical_bytes import lines_problem
from ehr_release.privacy.closed_world import violations
from ehr_release.privacy.formats.gccens import SCHEMA as GCCENS
from ehr_release.privacy.formats.lda import SCHEMA as LDA

META = (json.dumps({"k": 2, "caps": {}, "population": {"records": 9, "fingerprint": "x"}},
                   indent=2, sort_keys=True) + "\n").encode()


def _line(pid: str, codes: dict[str, int]) -> str:
    return json.dumps({"patient_id": pid, "codes": codes}, ensure_ascii=False)


def _gccens(*lines: str, meta: bytes = META) -> list[str]:
    body = "".join(line + "\n" for line in lines).encode()
    return list(violations({"censored.jsonl": body, "censoring.json": meta}, GCCENS))


codes_maps = st.dictionaries(st.sampled_from(["250", "401.9", "V45.81", "é12", "038"]),
                             st.integers(1, 5), min_size=2)


@given(st.lists(codes_maps, min_size=1, max_size=4))
def test_sorted_codes_in_the_writers_rendering_pass_any_other_order_fails(
        maps: list[dict[str, int]]) -> None:
    canonical = [_line(f"p{i}", dict(sorted(m.items()))) for i, m in enumerate(maps)]
    assert _gccens(*canonical) == []
    reversed_last = _line(f"p{len(maps) - 1}", dict(sorted(maps[-1].items(), reverse=True)))
    found = _gccens(*canonical[:-1], reversed_last)
    assert found == [f"censored.jsonl: line {len(maps)} lists keys out of their declared "
                     "order (maps' keys must be sorted)"]


def test_spacing_escapes_repeated_keys_and_field_order_are_refused_naming_the_line() -> None:
    good = _line("a", {"250": 1})
    for bad in ('{"patient_id": "b",  "codes": {"250": 1}}',       # spacing
                '{"patient_id": "\\u0062", "codes": {"250": 1}}',  # an escape
                '{"patient_id": "b", "codes": {"250": 1, "250": 1}}',  # a repeated key
                '{"patient_id": "b", "codes": {"250": -0}}'):  # a number's form (and 0)
        found = _gccens(good, bad)
        assert found and found[0].startswith("censored.jsonl: line 2 "), bad
    assert _gccens(good, '{"codes": {"250": 1}, "patient_id": "b"}') == [
        "censored.jsonl: line 2 lists keys out of their declared order (maps' keys must be "
        "sorted)"]


def test_line_endings_and_documents_are_held_to_the_rendering_too() -> None:
    good = _line("a", {"250": 1})
    body = (good + "\n").encode()
    assert violations({"censored.jsonl": body.rstrip(b"\n"), "censoring.json": META},
                      GCCENS).__next__().endswith("with one newline")
    assert _gccens(good, "") == ["censored.jsonl: line 2 is blank"]
    compact = json.dumps(json.loads(META), sort_keys=True).encode() + b"\n"
    assert _gccens(good, meta=compact) == [
        "censoring.json: is not the canonical rendering of its content (spacing, escapes, "
        "number form, key order or a repeated key)"]


def test_nested_lists_and_tuples_keep_their_order_lda() -> None:
    meta = (json.dumps({"algorithm": "lda", "method": "ags", "k": 1, "w_icd": 0.5,
                        "w_age": 0.5, "leaf_count": 0, "age_domain": [1, 128],
                        "hierarchy": "ICD-9-CM"},
                       indent=2, sort_keys=True) + "\n").encode()
    line = json.dumps({"patient_id": "a", "trajectory": [["401", [33, 36]], ["250", [40, 40]]]})
    assert list(violations({"trajectories.jsonl": (line + "\n").encode(),
                            "lda.json": meta}, LDA)) == []


labels = st.text(alphabet=st.sampled_from('ab,: "\\\né\u2028'), max_size=6)


@given(st.lists(st.tuples(labels, st.dictionaries(labels, st.integers(1, 3), max_size=3)),
                min_size=1, max_size=3),
       st.data())
def test_the_fast_comparison_agrees_with_json_dumps(rows: list[tuple[str, dict[str, int]]],
                                                    data: st.DataObject) -> None:
    """Strings holding commas, colons, quotes, backslashes and non-ASCII: the canonical
    file passes, and any one byte-level variant that still parses to the same content (a
    space added, a character escaped) is refused (by orjson's fast form or by json.dumps)."""
    objects = [{"patient_id": pid, "codes": dict(sorted(codes.items()))} for pid, codes in rows]
    lines = [json.dumps(o, ensure_ascii=False) for o in objects]
    body = "".join(line + "\n" for line in lines)
    root, rendering = GCCENS.files[0].root, GCCENS.files[0].rendering
    assert root is not None and rendering is not None
    assert lines_problem(body.encode(), objects, root, rendering) is None
    no = data.draw(st.integers(0, len(lines) - 1))
    line = lines[no]
    at = data.draw(st.integers(0, len(line) - 1))
    variants = [line[:at] + " " + line[at:], line.replace("é", "\\u00e9", 1)]
    for variant in variants:
        try:
            same = json.loads(variant) == objects[no]
        except json.JSONDecodeError:
            continue
        if variant == line or not same:
            continue
        bad = "".join((variant if i == no else x) + "\n" for i, x in enumerate(lines))
        assert lines_problem(bad.encode(), objects, root, rendering) is not None


def test_a_csv_file_is_its_minimal_quoting_with_newline_row_ends() -> None:
    """DiffGen's groups.csv: a cell quoted that needs no quotes, or a CRLF row end, is a
    channel the reader's parser hides; the closed world refuses both, naming the row."""
    import csv
    import io

    from ehr_release.privacy.closed_world import _csv_rendering_problem

    def problem(text: str) -> str | None:
        return _csv_rendering_problem(text, list(csv.reader(io.StringIO(text))))

    good = 'age,codes,count\n"[20, 30)",any,4\n[30-40),401,0\n'
    assert problem(good) is None
    assert problem(good.replace("any,", '"any",')) == (
        "row 2 is not the canonical CSV rendering of its cells (quoting, spacing or line end)")
    assert problem(good.replace("\n", "\r\n")) is not None
