"""(k, k^m) releases (artuc, artuc-baseline, rmr): nothing published beyond the declared format.

Issue 14, finding 1: the per-record ``suppressed`` count was a side channel. An attacker who
knows a patient's demographics and one code the patient's class does not show learns that
the patient's record is one with ``suppressed ≥ 1``; on the spec's worked example (k = 2,
m = 2) patient p5 is isolated from 494.1 (2 candidates → 1). The first test plays exactly
that attacker, with its own few lines of parsing, on the bytes ArtUC publishes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from ehr_release import registry
from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.formats.kkm import RENDERING
from ehr_release.release.verification import verify_release
from tests.kkm_release import read_records, to_files
from tests.test_artuc_worked_example import CONFIG, SEED, worked_example

NAMES = ("artuc", "artuc-baseline", "rmr", "artuc-unconstrained")


@pytest.fixture(scope="module")
def example():
    return worked_example()


@pytest.fixture
def params(tmp_path: Path) -> dict:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return registry.get("artuc").parse({"k": "2", "m": "2", "delta": "0.6", "epsilon": "2",
                                        "config": str(path), "seed": str(SEED)})


def _candidates_for_p5_knowing_494_1(files: dict[str, bytes]) -> int:
    """Records an attacker knowing p5's demographics (51, Nigeria, Male) and 494.1 cannot
    rule out, using every field of each line (an unknown field counts only as shown)."""
    lines = read_records(files)
    vocab: dict[str, set[str]] = {}
    for r in lines:
        vocab.setdefault(r["cluster"], set()).update(c for g in r["codes"] for c in g)
    count = 0
    for r in lines:
        d = r["demographics"]
        if not (d["age"][0] <= 51 <= d["age"][1] and d["origin"] in ("Nigeria", "Africa", "All")
                and d["gender"] in ("Male", "All")):
            continue
        shown = any("494.1" in g for g in r["codes"])
        if "494.1" in vocab[r["cluster"]]:
            count += shown          # the cluster kept 494.1: the record must show it
        elif r.get("suppressed", 1) >= 1:
            count += 1              # 494.1 was suppressed: only records that lost a code
    return count


def test_finding_1_suppressed_count_no_longer_isolates_p5(example) -> None:
    ds, cfg = example
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    files = release_files(anon)
    assert _candidates_for_p5_knowing_494_1(files) >= 2
    assert pq.read_schema(io.BytesIO(files["records.parquet"])).names == [
        "cluster", "age", "origin", "gender", "generalized_codes"]


@pytest.mark.parametrize("name", NAMES)
def test_the_suppressed_field_itself_fails_closed_world_and_attack(example, params,
                                                                    name) -> None:
    ds, _ = example
    entry = registry.get(name)
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    assert verify_release(entry, files, ds, params, None).holds
    lines = read_records(files)
    old = [{**r, "suppressed": int(i == 0)} for i, r in enumerate(lines)]  # one lost a code
    planted = to_files(old)
    report = verify_release(entry, planted, ds, params, None)
    assert not report.holds
    closed = next(r for r in report.requirements if r.name == "closed world")
    assert not closed.passed and "(a derived column) must be text" in closed.measured
    attack = entry.attack(planted, ds, params)
    assert not attack.passed and attack.smallest_candidate_set == 1


@pytest.mark.parametrize("name", NAMES)
def test_a_planted_per_record_field_fails_by_position(example, params, name) -> None:
    ds, _ = example
    entry = registry.get(name)
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    lines = read_records(files)
    planted = [{**r, "rank": i} for i, r in enumerate(lines)]
    bad = to_files(planted)
    report = verify_release(entry, bad, ds, params, None)
    assert not report.holds
    closed = next(r for r in report.requirements if r.name == "closed world")
    # Between cluster and ids the columns are derived from the file itself (the demographic
    # names are the configuration's): the closed world refuses the type by position, never
    # repeating the name, and the model verifier refuses the name.
    assert not closed.passed and "(a derived column) must be text" in closed.measured
    assert "rank" not in closed.measured
    # The demographic columns are the configuration's attribute names, which the static
    # schema cannot list: a value of a wrong kind fails the closed world, a node-like
    # string fails the model verifier's reading of the configured attributes — by
    # position, never by the name.
    nested = [{**r, "demographics": {**r["demographics"], "row": i}}
              for i, r in enumerate(lines)]
    bad = to_files(nested)
    closed = verify_release(entry, bad, ds, params, None).requirements[0]
    assert closed.name == "closed world" and not closed.passed
    assert "(a derived column) must be text" in closed.measured
    nested = [{**r, "demographics": {**r["demographics"], "row": f"r{i}"}}
              for i, r in enumerate(lines)]
    bad = to_files(nested)
    report = verify_release(entry, bad, ds, params, None)
    assert not report.holds and any("undeclared column at position" in r.measured
                                    for r in report.failures)
    assert not any("r0" in r.measured for r in report.failures)
    assert entry.attack(bad, ds, params).smallest_candidate_set == 1


@pytest.mark.parametrize("name", NAMES)
def test_an_undeclared_file_fails(example, params, name) -> None:
    ds, _ = example
    entry = registry.get(name)
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    files["codes.txt"] = b"493.2 494.1\n"
    report = verify_release(entry, files, ds, params, None)
    closed = next(r for r in report.requirements if r.name == "closed world")
    assert not report.holds and not closed.passed and "1 undeclared file" in closed.measured


@pytest.mark.parametrize("name", NAMES)
def test_records_are_counted(example, params, name) -> None:
    ds, _ = example
    entry = registry.get(name)
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    assert entry.count_records is not None
    assert entry.count_records(files) == len(read_records(files)) > 0


def test_finding_5_artuc_on_a_tiny_extract_releases_no_record(params) -> None:
    """One patient under u4 (age 51, Africa, Male) and one under u1–u3 at k = 2: both
    groups are below k, Step 2 suppresses every record, and the release is empty — the flow
    refuses it unless --allow-empty, reading count_records."""
    demo = pd.DataFrame([(51, "Ghana", "Male"), (20, "Italy", "Female")],
                        columns=["age", "origin", "gender"])
    ds = Dataset.from_records([["493.2"], ["494.1"]], demo)
    entry = registry.get("artuc")
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    assert entry.count_records is not None and entry.count_records(files) == 0
    assert verify_release(entry, files, ds, params, None).holds  # vacuously: nothing shown


def test_record_order_is_a_function_of_the_published_content(example, params) -> None:
    """Within a cluster lines are sorted; clusters are sorted by their lines and numbered in
    that order, so neither a line's position nor a cluster's label depends on input order."""
    ds, _ = example
    entry = registry.get("artuc")
    codes = [sorted(c) for c in ds.code_sets()]
    demo = ds.patients[["age", "origin", "gender"]]
    for rows in (list(range(8)), [7, 3, 5, 1, 0, 6, 2, 4]):
        shuffled = Dataset.from_records([codes[i] for i in rows],
                                        demo.iloc[rows].reset_index(drop=True))
        files = entry.anonymize(shuffled, params, np.random.default_rng(SEED))
        frame = pd.read_parquet(io.BytesIO(files["records.parquet"]))
        table = pd.read_parquet(io.BytesIO(files["generalized_codes.parquet"]))
        members = [list(g) for g in table["codes"]]
        assert list(table["id"]) == list(range(len(members))) and members == sorted(members)
        assert all(list(g) == sorted(g) for g in members)
        labels = list(frame["cluster"])
        ids = [list(x) for x in frame["generalized_codes"]]
        assert all(x == sorted(x) for x in ids)
        blocks = [[i for i, lab in zip(ids, labels, strict=True) if lab == c]
                  for c in dict.fromkeys(labels)]
        assert list(dict.fromkeys(labels)) == [f"C{i}" for i in range(1, len(blocks) + 1)]
        assert labels == sorted(labels, key=lambda c: int(c[1:]))  # each cluster together
        assert all(b == sorted(b) for b in blocks)
        shown = [tuple(frame.loc[labels.index(c), ["age", "origin", "gender"]].map(
            lambda v: tuple(v) if not isinstance(v, str) else v)) for c in dict.fromkeys(labels)]
        keys = list(zip(shown, blocks, strict=True))
        assert keys == sorted(keys)


def test_the_schema_documents_every_field() -> None:
    from ehr_release.privacy.formats.kkm import SCHEMA

    for name in NAMES:
        assert registry.get(name).schema is SCHEMA
    records, codes = SCHEMA.files
    assert records.name == "records.parquet" and records.doc
    assert codes.name == "generalized_codes.parquet" and codes.doc
    for path in ("cluster", "<demographic>", "generalized_codes", "(row order)",
                 "(file metadata)"):
        assert any(key.startswith(path) for key in records.fields_doc), path
    for path in ("id", "codes", "(file metadata)"):
        assert path in codes.fields_doc, path


# --------------------------------------------------------------------------- Parquet (issue 18)
def _honest(example, params, name: str = "artuc") -> tuple:
    ds, _ = example
    entry = registry.get(name)
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    assert verify_release(entry, files, ds, params, None).holds
    return ds, entry, files


def _parquet(table: pa.Table, **metadata: str) -> bytes:
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema, **dict(RENDERING.options)) as writer:
        writer.write_table(table)
        if metadata:
            writer.add_key_value_metadata(metadata)
    return sink.getvalue()


def _table(files: dict[str, bytes], name: str) -> pa.Table:
    return pq.read_table(io.BytesIO(files[name]))


def _failure(entry, files, ds, params) -> str:
    report = verify_release(entry, files, ds, params, None)
    assert not report.holds
    return "; ".join(r.measured for r in report.failures)


def test_one_pandas_call_loads_each_file_as_documented(example, params, tmp_path,
                                                       monkeypatch) -> None:
    from ehr_release.documents.formats_doc import how_to_load
    from ehr_release.privacy.formats.kkm import SCHEMA

    _, _, files = _honest(example, params)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    loaded = {f.name: eval(how_to_load(f), {"pandas": pd}) for f in SCHEMA.files}  # noqa: S307
    records, codes = loaded["records.parquet"], loaded["generalized_codes.parquet"]
    columns = list(records.columns)
    assert columns[0] == "cluster" and columns[-1] == "generalized_codes"
    assert set(columns[1:-1]) == {"age", "origin", "gender"}
    assert list(codes.columns) == ["id", "codes"]
    # the researcher's join: every record's codes, as the JSON Lines format listed them
    members = dict(zip(codes["id"], codes["codes"], strict=True))
    assert [[list(members[i]) for i in ids] for ids in records["generalized_codes"]] == [
        r["codes"] for r in read_records(files)]


def test_the_bytes_are_deterministic_and_carry_no_metadata(example, params) -> None:
    ds, cfg = example
    runs = [release_files(artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                                rng=np.random.default_rng(SEED))) for _ in range(2)]
    assert runs[0] == runs[1]
    for data in runs[0].values():
        meta = pq.read_metadata(io.BytesIO(data))
        assert meta.metadata is None
        assert all(not meta.row_group(0).column(j).is_stats_set
                   for j in range(meta.num_columns))


@pytest.mark.parametrize("name", NAMES)
def test_an_extra_column_or_file_fails_the_closed_world(example, params, name) -> None:
    ds, entry, files = _honest(example, params, name)
    codes = _table(files, "generalized_codes.parquet")
    extra = codes.append_column("count", pa.array(range(codes.num_rows), pa.int64()))
    bad = {**files, "generalized_codes.parquet": _parquet(extra)}
    assert "1 undeclared column at position 3" in _failure(entry, bad, ds, params)
    records = _table(files, "records.parquet")
    extra = records.append_column("rank", pa.array(range(records.num_rows), pa.int64()))
    bad = {**files, "records.parquet": _parquet(extra)}
    assert "records.parquet" in _failure(entry, bad, ds, params)
    bad = {**files, "raw.parquet": files["records.parquet"]}
    assert "1 undeclared file at position" in _failure(entry, bad, ds, params)


def test_metadata_or_a_null_fails_the_closed_world(example, params) -> None:
    ds, entry, files = _honest(example, params)
    records = _table(files, "records.parquet")
    bad = {**files, "records.parquet": _parquet(records, note="patient 10006 first")}
    failure = _failure(entry, bad, ds, params)
    assert "undeclared file metadata key" in failure and "10006" not in failure
    sink = io.BytesIO()
    records.to_pandas().to_parquet(sink, index=False)  # pandas' own notes: not declared here
    bad = {**files, "records.parquet": sink.getvalue()}
    assert "undeclared file metadata key" in _failure(entry, bad, ds, params)
    origin = records.column("origin").to_pylist()
    nulled = records.set_column(records.column_names.index("origin"), "origin",
                                pa.array([None, *origin[1:]], pa.string()))
    bad = {**files, "records.parquet": _parquet(nulled)}
    assert "column 4 (a derived column) holds a null value" in _failure(entry, bad, ds, params)


@pytest.mark.parametrize("name", NAMES)
def test_an_unsorted_order_fails_verification_and_is_a_label_to_the_attack(
        example, params, name) -> None:
    ds, entry, files = _honest(example, params, name)
    lines = read_records(files)
    swapped = [lines[-1], *lines[:-1]]  # the last cluster's record first
    bad = to_files(swapped)
    assert "clusters must be labelled C1, C2" in _failure(entry, bad, ds, params)
    relabelled = to_files([{**r, "cluster": f"C{len(lines) - i}"} for i, r in enumerate(lines)])
    assert "clusters must be labelled C1, C2" in _failure(entry, relabelled, ds, params)
    codes = _table(files, "generalized_codes.parquet")
    reversed_codes = pa.table({"id": codes.column("id"),
                               "codes": pa.array(codes.column("codes").to_pylist()[::-1])})
    bad = {**files, "generalized_codes.parquet": _parquet(reversed_codes)}
    assert "sorted order of their codes" in _failure(entry, bad, ds, params)


def test_rows_out_of_order_inside_a_cluster_fail(example, params) -> None:
    ds, entry, files = _honest(example, params)
    lines = read_records(files)
    first = [r for r in lines if r["cluster"] == "C1"]
    assert len({json.dumps(r) for r in first}) > 1  # the worked example's C1 differs inside
    order = sorted(range(len(first)), key=lambda i: json.dumps(first[i]), reverse=True)
    bad = to_files([first[i] for i in order] + lines[len(first):])
    assert "a cluster's rows must be sorted by their ids" in _failure(entry, bad, ds, params)


@pytest.mark.parametrize("name", NAMES)
def test_an_id_outside_the_code_table_fails_verification_and_the_attack(
        example, params, name) -> None:
    ds, entry, files = _honest(example, params, name)
    records = _table(files, "records.parquet")
    ids = records.column("generalized_codes").to_pylist()
    ids[0] = [*ids[0], 10_000]
    bad = {**files, "records.parquet": _parquet(records.set_column(
        records.column_names.index("generalized_codes"), "generalized_codes",
        pa.array(ids, pa.list_(pa.int32()))))}
    assert "is not in generalized_codes.parquet" in _failure(entry, bad, ds, params)
    from ehr_release.release.verification import attack_release

    assert not attack_release(entry, bad, ds, params, None).passed


@pytest.mark.parametrize("name", NAMES)
def test_an_unused_code_table_entry_fails_verification_and_narrows_in_the_attack(
        example, params, name) -> None:
    """An entry no record shows could carry a suppressed patient's codes: p5's."""
    ds, entry, files = _honest(example, params, name)
    lines = read_records(files)
    bad = to_files(lines, extra_codes=[["493.2", "494.1", "999.9"]])  # a code no one has
    assert "a generalized code no record shows" in _failure(entry, bad, ds, params)
    attack = entry.attack(bad, ds, params)
    assert not attack.passed and attack.smallest_candidate_set == 1
    assert "unused code-table entries" in attack.measured
