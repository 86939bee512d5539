"""The one dataset model every reader produces and every algorithm and verifier consumes.

A :class:`Dataset` is two tables that share ``patient_id``:

* ``patients`` — one row per patient, indexed by ``patient_id`` (string), one column per
  demographic attribute, plus optionally a class column (e.g. in-hospital death).
* ``diagnoses`` — one row per recorded diagnosis: ``patient_id``, ``code`` (dotted, a node of
  the hierarchy of the dataset's ``code_system``, ICD-9-CM or ICD-10-CM) and ``age``
  (nullable integer: the patient's age when the code was recorded; present for longitudinal
  data). A code may repeat for a patient, so each patient's codes form a multiset.

Views derived from these (sets, multisets, trajectories) are computed on demand; the two
tables are the single source of truth so no stage re-parses what an earlier one produced.
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

PATIENT_ID = "patient_id"
CODE = "code"
AGE = "age"
#: The schema key (not a column) holding the GEM mapping's losses (see ``code_mapping``).
CODE_MAPPING = "code_mapping"


@dataclass(frozen=True, eq=False)
class Dataset:
    """Patients with demographics and a multiset of diagnosis codes (optionally aged).

    Parameters
    ----------
    patients
        Indexed by ``patient_id`` (str, unique); columns are demographic attributes.
    diagnoses
        Columns ``patient_id``, ``code``, ``age`` (Int64, may be all missing).
    class_column
        Name of the column of ``patients`` holding the class label, if any.
    source
        Where the data came from (file names), for messages and the certificate.
    code_system
        ``icd9`` or ``icd10`` (:data:`ehr_release.model.hierarchy.CODE_SYSTEMS`): which packaged
        hierarchy the codes are nodes of. One per extract: readers refuse a mix, unless
        the request maps ICD-9-CM to ICD-10-CM (:mod:`ehr_release.ingest.gem`).
    code_mapping
        That mapping's losses in stored form (:class:`~ehr_release.ingest.gem.MappingLosses`
        ``.as_schema()``), None when no code was mapped; kept in :meth:`schema` under
        :data:`CODE_MAPPING` so the certificate can report them.
    """

    patients: pd.DataFrame
    diagnoses: pd.DataFrame
    class_column: str | None = None
    source: str = ""
    code_system: str = "icd9"
    code_mapping: str | None = None

    def __post_init__(self) -> None:
        # Derived views, memoized. Deliberately not a dataclass field: Prefect walks every
        # field of a task argument looking for futures, and a million cached code sets made
        # that walk cost seconds per task (bench/e2e_flow.py).
        object.__setattr__(self, "_cache", {})

    # ------------------------------------------------------------------ basic shape
    @property
    def n_patients(self) -> int:
        return len(self.patients)

    @property
    def patient_ids(self) -> list[str]:
        return list(self.patients.index)

    @property
    def demographic_columns(self) -> list[str]:
        return [c for c in self.patients.columns if c != self.class_column]

    @property
    def is_longitudinal(self) -> bool:
        return bool(self.diagnoses[AGE].notna().any()) if len(self.diagnoses) else False

    @cached_property
    def _positions(self) -> pd.Series:
        return pd.Series(range(self.n_patients), index=self.patients.index)

    # ------------------------------------------------------------------ code views
    def code_sets(self) -> list[frozenset[str]]:
        """Each patient's distinct codes, in ``patients`` order (repeats collapsed)."""
        if "sets" not in self._cache:
            out: list[set[str]] = [set() for _ in range(self.n_patients)]
            pos = self._positions.loc[self.diagnoses[PATIENT_ID]].to_numpy()
            for p, code in zip(pos, self.diagnoses[CODE].to_numpy(), strict=True):
                out[p].add(code)
            self._cache["sets"] = [frozenset(s) for s in out]
        return self._cache["sets"]

    def code_multisets(self) -> list[Counter[str]]:
        """Each patient's codes with their multiplicities, in ``patients`` order."""
        out: list[Counter[str]] = [Counter() for _ in range(self.n_patients)]
        pos = self._positions.loc[self.diagnoses[PATIENT_ID]].to_numpy()
        for p, code in zip(pos, self.diagnoses[CODE].to_numpy(), strict=True):
            out[p][code] += 1
        return out

    def trajectories(self) -> list[list[tuple[str, int]]]:
        """Each patient's (code, age) pairs ordered by age then code; needs ages."""
        diag = self.diagnoses.dropna(subset=[AGE]).sort_values([PATIENT_ID, AGE, CODE])
        out: list[list[tuple[str, int]]] = [[] for _ in range(self.n_patients)]
        pos = self._positions.loc[diag[PATIENT_ID]].to_numpy()
        for p, code, age in zip(pos, diag[CODE].to_numpy(), diag[AGE].to_numpy(), strict=True):
            out[p].append((code, int(age)))
        return out

    def distinct_codes(self) -> list[str]:
        return sorted(self.diagnoses[CODE].unique())

    # ------------------------------------------------------------------ identity
    def fingerprint(self) -> str:
        """SHA-256 over a canonical serialization: same data → same hash, whatever the file.

        Rows are sorted so that a re-ordered copy of the same extract is recognised.
        """
        h = hashlib.sha256(b"ehr_release.dataset.v1\n")
        if self.code_system != "icd9":  # ICD-9 extracts keep the hashes they always had
            h.update(f"code_system={self.code_system}\n".encode())
        pats = self.patients.sort_index()
        buf = io.StringIO()
        pats.to_csv(buf, lineterminator="\n")
        h.update(buf.getvalue().encode())
        diag = self.diagnoses.sort_values([PATIENT_ID, CODE, AGE]).reset_index(drop=True)
        buf = io.StringIO()
        diag.to_csv(buf, index=False, lineterminator="\n")
        h.update(buf.getvalue().encode())
        return h.hexdigest()

    def schema(self) -> dict[str, str]:
        """Column name → dtype, demographics first then the diagnosis columns."""
        out = {str(c): str(t) for c, t in self.patients.dtypes.items()}
        out["codes"] = f"multiset[{self.code_system}]" + ("+age" if self.is_longitudinal else "")
        if self.code_mapping is not None:  # not a column: the GEM mapping's losses
            out[CODE_MAPPING] = self.code_mapping
        return out

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_records(
        cls,
        codes: list[list[str]] | list[list[tuple[str, int]]],
        demographics: pd.DataFrame | None = None,
        *,
        patient_ids: list[str] | None = None,
        class_column: str | None = None,
        source: str = "memory",
        code_system: str = "icd9",
    ) -> Dataset:
        """Build a dataset from Python lists (tests, fixtures, generators).

        ``codes[i]`` is patient i's list of codes, or of ``(code, age)`` pairs.
        Codes are taken as given (no hierarchy check): readers validate, fixtures are trusted.
        """
        n = len(codes)
        ids = patient_ids or [f"p{i + 1}" for i in range(n)]
        if demographics is None:
            demographics = pd.DataFrame(index=pd.Index(ids, name=PATIENT_ID))
        else:
            demographics = demographics.copy()
            demographics.index = pd.Index(ids, name=PATIENT_ID)
        pid, cds, ages = [], [], []
        for i, rec in zip(ids, codes, strict=True):
            for item in rec:
                pid.append(i)
                if isinstance(item, tuple):
                    cds.append(item[0])
                    ages.append(item[1])
                else:
                    cds.append(item)
                    ages.append(None)
        diagnoses = pd.DataFrame(
            {PATIENT_ID: pid, CODE: cds, AGE: pd.array(ages, dtype="Int64")},
        )
        return cls(demographics, diagnoses, class_column=class_column, source=source,
                   code_system=code_system)
