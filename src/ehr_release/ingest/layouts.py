"""Which folder layout an input folder is, told by the tables it holds.

* **MIMIC-III**: ``PATIENTS``, ``ADMISSIONS``, ``DIAGNOSES_ICD`` (``icd9_code``);
* **MIMIC-IV** ``hosp``: the same three tables, ``diagnoses_icd`` with ``icd_version`` (the
  folder itself, or a MIMIC-IV root holding ``hosp/``);
* **OMOP CDM v5.4**: ``person`` and ``condition_occurrence`` (+ ``visit_occurrence``,
  ``death``, ``observation_period``);
* **FHIR R4 bulk export**: ``*.ndjson`` files.

Tables are CSV or Parquet, named in any letter case; compressed tables (``.csv.gz``, as
PhysioNet ships MIMIC-IV) are refused with the advice to decompress them, because the
input limits are checked on the bytes as read.
"""

from __future__ import annotations

from pathlib import Path

from ehr_release.core.errors import InputError
from ehr_release.model.dataset import Dataset

TABLE_SUFFIXES = {".csv", ".parquet", ".pq"}


def read_folder(folder: Path, *, class_column: str | None = None,
                code_system: str | None = None, code_mapping: str | None = None) -> Dataset:
    """Read a folder of any recognised layout (see the module docstring)."""
    from ehr_release.ingest import fhir, mimic3, mimic4, omop

    if (folder / "hosp").is_dir() and not _tables(folder):
        folder = folder / "hosp"
    tables = _tables(folder)
    ndjson = sorted(p for p in folder.iterdir() if p.is_file()
                    and p.name.lower().endswith(".ndjson"))
    if all(t in tables for t in omop.TABLES):
        files = {t: tables[t] for t in (*omop.TABLES, *omop.OPTIONAL) if t in tables}
        return omop.read_omop(folder, files, class_column=class_column,
                              code_system=code_system, code_mapping=code_mapping)
    if all(t in tables for t in mimic4.TABLES):
        if mimic4.is_mimic4(tables["diagnoses_icd"]):
            return mimic4.read_mimic4(folder, tables, class_column=class_column,
                                      code_system=code_system, code_mapping=code_mapping)
        return mimic3.read_mimic_dir(folder, class_column=class_column,
                                     code_system=code_system, code_mapping=code_mapping)
    if ndjson:
        if code_mapping is not None:  # FHIR codings name their system: no mix to guess
            raise InputError("code mapping is not supported for FHIR exports yet: map the "
                             "Condition codings before the export", file=str(folder))
        return fhir.read_fhir(folder, ndjson, class_column=class_column,
                              code_system=code_system)
    compressed = [p.name for p in folder.iterdir() if p.name.lower().endswith(".gz")]
    if compressed:
        raise InputError("holds compressed tables; decompress them first (gunzip *.gz)",
                         file=str(folder))
    for table in mimic4.TABLES:  # the historic message: the folder is taken for MIMIC
        if table not in tables and not any(t in tables for t in omop.TABLES):
            raise InputError(f"MIMIC folder lacks the {table.upper()} table "
                             "(or: an OMOP folder needs person and condition_occurrence, "
                             "a FHIR export *.ndjson files)", file=str(folder))
    missing = next(t for t in omop.TABLES if t not in tables)
    raise InputError(f"OMOP folder lacks the {missing} table", file=str(folder))


def _tables(folder: Path) -> dict[str, Path]:
    return {p.stem.lower(): p for p in folder.iterdir()
            if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES}
