"""The column-wise JSON Lines reader (issue 18, goal 2) is never more lenient than the
per-line reader it stands in for: its shape test agrees with the closed world's per-value one,
and what orjson refuses or reads differently goes back to the per-line readers, whose
verdicts (format, censoring, attack) stay what they were."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.gccens.release import META_FILE, RECORDS_FILE
from ehr_release.privacy.attacks.gccens import attack_kmap
from ehr_release.privacy.closed_world import (
    ListOf,
    MapOf,
    Nullable,
    Obj,
    OneOf,
    TupleOf,
    _conforms,
    violations,
)
from ehr_release.privacy.formats.gccens import SCHEMA as GCCENS
from ehr_release.privacy.formats.lda import SCHEMA as LDA
from ehr_release.privacy.gccens import check_kmap
from ehr_release.privacy.json_columns import all_conform, loads_lines
from tests import spec_strategies

specs = spec_strategies.specs(enum_values=("a", 1, True, 0.5), one_of_max=2)
values = spec_strategies.json_values()


def _has_one_of(spec) -> bool:
    if isinstance(spec, OneOf):
        return True
    if isinstance(spec, ListOf | Nullable):
        return _has_one_of(spec.item if isinstance(spec, ListOf) else spec.spec)
    if isinstance(spec, MapOf):
        return _has_one_of(spec.value)
    if isinstance(spec, TupleOf):
        return any(map(_has_one_of, spec.items))
    if isinstance(spec, Obj):
        return any(map(_has_one_of, spec.fields.values()))
    return False


@given(spec=specs, batch=st.lists(values, max_size=4))
@settings(max_examples=1000, deadline=None)
def test_column_wise_shape_test_agrees_with_the_per_value_one(spec, batch) -> None:
    """Never accepts what one value's test refuses; equal wherever OneOf is absent (which
    it leaves to the per-value test)."""
    each = all(_conforms(v, spec) for v in batch)
    if all_conform(batch, spec):
        assert each
    elif not _has_one_of(spec):
        assert not each


def test_orjson_refuses_what_json_alone_accepts() -> None:
    for line in (b'{"a": NaN}', b'{"a": Infinity}', b'{"a": "\\ud800"}', b'{"a": 1e400}',
                 b'{"a": "\xff"}', b"\xc2\xa0", b'{"a": 1} {"b": 2}'):
        assert loads_lines(b'{"ok": 1}\n' + line + b"\n") is None, line
    assert loads_lines(b'\n{"a": 1}\n  \n{"a": [2]}\r\n') == [{"a": 1}, {"a": [2]}]
    assert loads_lines(b'{"a": 1, "a": 2}\n') == [{"a": 2}]  # as json.loads: last wins


def _gccens(line: str) -> dict[str, bytes]:
    return {RECORDS_FILE: (json.dumps({"patient_id": "a", "codes": {"250": 1}}) + "\n"
                           + line + "\n").encode(),
            META_FILE: (json.dumps({"k": 1, "caps": {}, "population": {
                "records": 2, "fingerprint": "x"}}, indent=2, sort_keys=True) + "\n").encode()}


STRICT_EDGES = {  # a second line whose count is not an integer ≥ 1, in JSON's corners
    "bool": '{"patient_id": "b", "codes": {"250": true}}',
    "float": '{"patient_id": "b", "codes": {"250": 1.0}}',
    "nan": '{"patient_id": "b", "codes": {"250": NaN}}',
    "infinity": '{"patient_id": "b", "codes": {"250": Infinity}}',
    "zero": '{"patient_id": "b", "codes": {"250": 0}}',
    "string": '{"patient_id": "b", "codes": {"250": "1"}}',
    "extra key": '{"patient_id": "b", "codes": {"250": 1}, "n": 1}',
    "id not text": '{"patient_id": 2, "codes": {"250": 1}}',
}


def test_gccens_refuses_every_non_integer_count_as_before() -> None:
    pop, ids, sample = [{"250": 2}, {"250": 2}], ["a", "b"], [{"250": 1}, {"250": 1}]
    for name, line in STRICT_EDGES.items():
        files = _gccens(line)
        report = check_kmap(files, ids, sample, pop, 1, {})
        assert not report.holds and report.requirements[0].name == "release format", name
        if name != "zero":  # a zero count is in shape; the verifier refuses it
            assert list(violations(files, GCCENS)), name


def test_gccens_reads_what_only_json_reads_as_before() -> None:
    """A count beyond 64 bits is an integer to json (orjson reads a float): the format
    holds as it did, and the censoring check is what refuses it. A line blank only to
    Unicode (a no-break space) is skipped as before."""
    pop, ids, sample = [{"250": 2}, {"250": 2}], ["a", "b"], [{"250": 1}, {"250": 1}]
    files = _gccens(json.dumps({"patient_id": "b", "codes": {"250": 2 ** 70}}))
    assert not list(violations(files, GCCENS))
    report = {r.name: r.passed for r in check_kmap(files, ids, sample, pop, 1, {}).requirements}
    assert report["release format"] and not report["censoring only"]
    files = _gccens('{"patient_id": "b", "codes": {"250": 1}}\n\u00a0')
    assert check_kmap(files, ids, sample, pop, 1, {}).holds
    # ... but the closed world refuses the line: bytes that are no line's rendering.
    assert list(violations(files, GCCENS)) == ["censored.jsonl: line 3 is blank"]


def test_gccens_attack_reads_edges_as_before() -> None:
    pop, ids, sample = [{"250": 2}, {"250": 2}], ["a", "b"], [{"250": 1}, {"250": 1}]
    for name in ("nan", "float", "bool", "string"):
        report = attack_kmap(_gccens(STRICT_EDGES[name]), ids, sample, pop, 1, {})
        assert report.smallest_candidate_set is None and "unreadable" in report.measured, name
    # a zero count and an extra field are read (the zero dropped, the field used)
    for name in ("zero", "extra key"):
        assert attack_kmap(_gccens(STRICT_EDGES[name]), ids, sample, pop, 1, {}).passed, name


def test_lda_closed_world_refuses_booleans_and_floats_for_ages() -> None:
    meta = json.dumps({"algorithm": "lda", "method": "ags", "k": 1, "w_icd": 0.5,
                       "w_age": 0.5, "leaf_count": 0, "age_domain": [1, 128],
                       "hierarchy": "ICD-9-CM"},
                      indent=2, sort_keys=True).encode() + b"\n"
    good = '{"patient_id": "a", "trajectory": [["401", [33, 36]]]}'
    assert not list(violations({"trajectories.jsonl": (good + "\n").encode(),
                                "lda.json": meta}, LDA))
    for bad in ('[33, true]', '[33, 36.0]', '[33, NaN]', '[33]', '[33, 36, 37]'):
        line = good.replace("[33, 36]", bad)
        found = list(violations({"trajectories.jsonl": (good + "\n" + line + "\n").encode(),
                                 "lda.json": meta}, LDA))
        assert found and found[0].startswith("trajectories.jsonl: line 2"), bad


def test_the_kept_parse_serves_only_the_same_bytes_object() -> None:
    first, second = b'{"a": 1}\n', b'{"a": 2}\n'
    assert loads_lines(first) == [{"a": 1}]
    assert loads_lines(second) == [{"a": 2}]
    assert loads_lines(first) == [{"a": 1}]
    assert loads_lines(first) is loads_lines(first)  # kept: parsed once
