"""ICD-9-CM → ICD-10-CM by the CMS GEMs: the packaged table, the rules, the readers, the
request option, and what the certificate and datasheet say about the losses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from ehr_release.core.errors import InputError
from ehr_release.documents.plain import code_mapping_words
from ehr_release.ingest.gem import (
    GEM_WORDS,
    ONE_TO_MANY,
    ONE_TO_ONE,
    UNMAPPED,
    MappingLosses,
    gem_targets,
    map_icd9,
)
from ehr_release.ingest.preflight import preflight
from ehr_release.ingest.readers import read_dataset
from ehr_release.model.dataset import CODE_MAPPING
from ehr_release.model.hierarchy import code_hierarchy
from ehr_release.planning.request import ReleaseRequest
from ehr_release.samples.sample import generate_sample
from ehr_release.samples.sample_layouts import numbered, write_mimic4


def test_packaged_table_covers_every_icd9_leaf_with_icd10_nodes() -> None:
    table = gem_targets()
    h9, h10 = code_hierarchy("icd9"), code_hierarchy("icd10")
    leaves = {n for n in h9.parent if not h9.children.get(n)}
    assert leaves <= set(table)
    assert all(t in h10 and t != h10.root for ts in table.values() for t in ts)


@pytest.mark.parametrize(("code", "expected"), [
    ("401.9", ("I10", ONE_TO_ONE)),
    ("V45.81", ("Z95.1", ONE_TO_ONE)),
    # four alternatives (E11.311, E11.319, E11.36, E11.39): what they share, not one of them
    ("250.50", ("E11.3", ONE_TO_MANY)),
    # a category is not a GEM source: the GEM rows of the codes under it, here E10.x and
    # E11.x — they share the block E08-E13 only, not a code
    ("250", (None, UNMAPPED)),
    ("493.2", ("J44", ONE_TO_MANY)),  # J44.0, J44.1, J44.9 under it
    ("365.70", (None, UNMAPPED)),  # a "no map" row
])
def test_rules(code: str, expected: tuple[str | None, str]) -> None:
    assert map_icd9(code) == expected


def test_one_to_many_is_the_deepest_common_ancestor_of_all_targets() -> None:
    h10 = code_hierarchy("icd10")
    several = sorted(c for c, ts in gem_targets().items() if len(ts) > 1)
    assert len(several) > 2000
    for code in several[::40]:
        node, outcome = map_icd9(code)
        targets = gem_targets()[code]
        if node is None:  # no category shared
            assert outcome == UNMAPPED
            assert len({h10.ancestor_at_level(t, 3) for t in targets}) > 1
            continue
        assert outcome == ONE_TO_MANY and h10.level[node] >= 3
        covered = [t for t in targets if node == t or node in h10.ancestors(t)]
        assert covered == list(targets)
        # no child of the node holds every target: it is the deepest
        for child in h10.children.get(node, []):
            assert not all(t == child or child in h10.ancestors(t) for t in targets)


def _wide(tmp_path: Path, codes: list[str]) -> Path:
    path = tmp_path / "wide.csv"
    rows = "".join(f"p{i},{40 + i},{c}\n" for i, c in enumerate(codes, start=1))
    path.write_text("patient_id,age,codes\n" + rows)
    return path


def test_a_mixed_csv_is_refused_without_the_option_and_mapped_with_it(tmp_path: Path) -> None:
    path = _wide(tmp_path, ["401.9;E11.9", "250.50 365.70", "I10;250.50"])
    with pytest.raises(InputError, match="extract mixes ICD-9-CM and ICD-10-CM"):
        read_dataset(path)
    ds = read_dataset(path, code_mapping="gem")
    assert ds.code_system == "icd10"
    assert sorted(ds.diagnoses["code"]) == ["E11.3", "E11.3", "E11.9", "I10", "I10"]
    losses = MappingLosses.from_schema(ds.schema()[CODE_MAPPING])
    assert losses == MappingLosses(mapped_codes=3, mapped_diagnoses=4, one_to_many_codes=1,
                                   one_to_many_diagnoses=2, unmapped_codes=1,
                                   unmapped_diagnoses=1)
    preflight(path, code_mapping="gem")  # the preflight leaves a mapped extract to the reader


def test_without_the_option_nothing_records_a_mapping(tmp_path: Path) -> None:
    ds = read_dataset(_wide(tmp_path, ["E11.9", "I10"]))
    assert CODE_MAPPING not in ds.schema() and ds.code_mapping is None


def test_a_bad_code_is_still_refused_by_row_under_the_option(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="row 2"):
        read_dataset(_wide(tmp_path, ["E11.9", "ZZZ.99"]), code_mapping="gem")


def test_the_option_yields_icd10_only(tmp_path: Path) -> None:
    path = _wide(tmp_path, ["401.9"])
    with pytest.raises(InputError, match="declare code system icd10"):
        preflight(path, code_system="icd9", code_mapping="gem")
    with pytest.raises(InputError, match="unknown code mapping"):
        preflight(path, code_mapping="crosswalk")
    base = {"run_id": "rel-" + "0" * 32, "input_path": str(path), "algorithm": "lda",
            "requester": "s", "out_dir": str(tmp_path)}
    with pytest.raises(ValidationError, match="declare code_system icd10"):
        ReleaseRequest(**base, code_system="icd9", code_mapping="gem")
    assert ReleaseRequest(**base, code_mapping="gem").code_mapping == "gem"


def _mixed_mimic4(tmp_path: Path) -> Path:
    """A MIMIC-IV folder whose first patients were coded in ICD-9-CM (icd_version 9)."""
    sample = numbered(generate_sample(40, seed=3, longitudinal=True, code_system="icd10"))
    folder = write_mimic4(sample, tmp_path / "mimic4")
    dx = pd.read_csv(folder / "diagnoses_icd.csv", dtype=str)
    nine = dx["subject_id"].astype(int) < 1010
    dx.loc[nine, "icd_code"] = "4019"  # undotted, as MIMIC-IV writes it
    dx.loc[nine, "icd_version"] = "9"
    dx.to_csv(folder / "diagnoses_icd.csv", index=False)
    return folder


def test_mimic4_maps_the_rows_icd_version_declares_icd9(tmp_path: Path) -> None:
    folder = _mixed_mimic4(tmp_path)
    with pytest.raises(InputError, match="extract mixes ICD-9-CM and ICD-10-CM"):
        read_dataset(folder)
    ds = read_dataset(folder, code_mapping="gem")
    dx = pd.read_csv(folder / "diagnoses_icd.csv", dtype=str)
    nine = dx["icd_version"] == "9"
    assert ds.code_system == "icd10" and len(ds.diagnoses) == len(dx)
    mapped = ds.diagnoses[ds.diagnoses["patient_id"].astype(int) < 1010]
    assert set(mapped["code"]) == {"I10"} and len(mapped) == int(nine.sum())
    losses = MappingLosses.from_schema(ds.code_mapping or "")
    assert (losses.mapped_codes, losses.mapped_diagnoses) == (1, int(nine.sum()))


def test_certificate_counts_and_datasheet_rule_only() -> None:
    losses = MappingLosses(mapped_codes=7, mapped_diagnoses=30, one_to_many_codes=2,
                           one_to_many_diagnoses=5, unmapped_codes=1, unmapped_diagnoses=3)
    schema = {"codes": "multiset[icd10]", CODE_MAPPING: losses.as_schema()}
    internal = code_mapping_words(schema, losses=True) or ""
    public = code_mapping_words(schema, losses=False) or ""
    assert internal.startswith(GEM_WORDS)
    assert "2 codes (5 diagnoses) through a one-to-many choice" in internal
    assert "1 codes (3 diagnoses) unmapped" in internal
    assert public.startswith(GEM_WORDS)
    # the recipient's copy is the same whatever the extract lost: no count of the true data
    other = {**schema, CODE_MAPPING: MappingLosses(mapped_codes=1).as_schema()}
    assert code_mapping_words(other, losses=False) == public
    assert code_mapping_words(other, losses=True) != internal
    assert code_mapping_words({"codes": "multiset[icd10]"}, losses=True) is None


def test_the_certificate_shows_the_losses_and_lists_no_extra_column() -> None:
    import dataclasses
    from datetime import UTC, datetime

    from ehr_release.documents.certificate import (
        CertificateContext,
        render_certificate_html,
        source_columns,
    )
    from ehr_release.model.reports import UtilityReport, VerificationReport

    losses = MappingLosses(mapped_codes=4, mapped_diagnoses=9, one_to_many_codes=2,
                           one_to_many_diagnoses=3, unmapped_codes=1, unmapped_diagnoses=2)
    ctx = CertificateContext(
        run_id="rel-" + "0" * 32, created_at=datetime(2026, 11, 22, tzinfo=UTC),
        requester="s", dataset_source="x.csv", dataset_fingerprint="ab" * 32, dataset_rows=9,
        dataset_schema={"age": "Int64", "codes": "multiset[icd10]",
                        CODE_MAPPING: losses.as_schema()},
        algorithm="demo", algorithm_summary="demo", privacy_model="k-anonymity",
        parameters={}, verification=VerificationReport("demo", []),
        utility=UtilityReport("demo", {}), manifest=[], approval=None, audit_head="ef" * 32,
        audit_events=1, status="verified")
    html = render_certificate_html(ctx)
    assert "Code mapping" in html and losses.words() in html
    assert [c for c, _, _ in source_columns(ctx)] == ["age", "codes"]
    plain = dataclasses.replace(ctx, dataset_schema={"codes": "multiset[icd10]"})
    assert "Code mapping" not in render_certificate_html(plain)


def test_an_all_icd9_extract_maps_its_codes_that_are_icd10_nodes_too(tmp_path: Path) -> None:
    """``V09.0`` is an ICD-9-CM code and an ICD-10-CM one: in an extract that is ICD-9-CM
    throughout (MIMIC-III) it is ICD-9 and mapped, not kept as the pedestrian injury."""
    node = map_icd9("V09.0")[0]
    assert node is not None and node != "V09.0"
    ds = read_dataset(_wide(tmp_path, ["401.9;V09.0"]), code_mapping="gem")
    assert sorted(ds.diagnoses["code"]) == sorted(["I10", node])


def test_the_readme_runs_one_release_per_input_shape() -> None:
    """OMOP, FHIR, MIMIC-IV and an ICD-10 CSV each get a run that is approved (the blocks
    themselves run in tests/test_docs_run.py)."""
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"^```bash\n(.*?)^```$", readme, re.M | re.S))
    assert "scripts/write_sample_layouts.py layouts" in blocks
    assert "for shape in omop fhir; do" in blocks and '--input "layouts/$shape"' in blocks
    assert "--input layouts/mimic4" in blocks
    assert "--input examples/data/sample-icd10/patients.csv" in blocks
    assert blocks.count("ehr-release approve") >= 3


def test_a_fhir_export_refuses_the_mapping_in_words(tmp_path: Path) -> None:
    """FHIR codings name their system per resource: the option is not offered there yet."""
    from ehr_release.samples.sample_layouts import write_fhir

    folder = write_fhir(numbered(generate_sample(20, seed=2, longitudinal=True)),
                        tmp_path / "fhir")
    with pytest.raises(InputError, match="code mapping is not supported for FHIR"):
        read_dataset(folder, code_mapping="gem")


def test_compare_refuses_a_mixed_extract_unless_asked_to_map_it(env, tmp_path: Path) -> None:
    """`compare --code-mapping gem` reads the mixed extract as `run --code-mapping gem` does
    (the candidates run on the mapped data); without it the extract is refused as before."""
    import json

    from typer.testing import CliRunner

    from ehr_release.cli import app

    _, out = env
    path = _wide(tmp_path, ["401.9;E11.9", "250.50 365.70", "I10;250.50", "E11.9 I10"])
    base = ["compare", "--input", str(path), "--algorithm", "code-counts", "--param", "k=1",
            "--requester", "steward", "--out", str(out)]
    refused = CliRunner().invoke(app, base)
    assert refused.exit_code == 1
    assert "extract mixes ICD-9-CM and ICD-10-CM codes" in refused.output
    assert not (out / "comparisons").exists()
    done = CliRunner().invoke(app, [*base, "--code-mapping", "gem"])
    assert done.exit_code == 0, done.output
    report = json.loads((Path(done.stdout.strip().splitlines()[-1]) / "comparison.json")
                        .read_text())
    mapped = read_dataset(path, code_mapping="gem")
    assert report["dataset_fingerprint"] == mapped.fingerprint()
    assert [r["verified"] for r in report["rows"]] == [True]
