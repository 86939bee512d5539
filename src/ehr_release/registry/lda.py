"""Registry glue for ``lda`` (A-GS alignment) and the pieces ``lda-baseline`` shares.

LDA needs longitudinal data: every diagnosis must carry the patient's age when it was
recorded, inside the age hierarchy 1–128. That is checked here, before any clustering, so a
non-longitudinal extract fails with one message naming a patient instead of deep inside the
algorithm. The weights must sum to 1; a parameter cannot see another one, so the entry's
``parse`` checks that pair after the per-parameter rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ehr_release.core.errors import InputError, ParameterError
from ehr_release.model.hierarchy import code_hierarchy, code_system
from ehr_release.parameters.params import Interval, OneOf, Param
from ehr_release.privacy.formats.lda import RECORDS_FILE, SCHEMA, count_records
from ehr_release.registry import AlgorithmEntry, ReleaseFiles, lazy

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    from ehr_release.model.dataset import Dataset

NAME = "lda"
AGE_FIRST, AGE_DEPTH = 1, 7  # the thesis' age hierarchy: 1–128 as a full binary tree
AGE_LAST = AGE_FIRST + (1 << AGE_DEPTH) - 1
METHODS = {"lda": "ags", "lda-baseline": "baseline"}


def _weight(name: str) -> Param:
    return Param(name, float, f"weight of the {name[2:].upper()} loss in the alignment cost "
                 "(w_icd + w_age = 1)", default=0.5, check=Interval(float, 0, 1))


PARAMS = (
    Param("k", int, "every published trajectory is shared by ≥ k patients",
          check=Interval(int, 2), example="5"),
    _weight("w_icd"),
    _weight("w_age"),
    Param("leaf_count", int, "L(leaf) in the loss metric: 0 as in the thesis' worked "
          "examples, 1 reads its Def. 4 literally", default=0, check=OneOf((0, 1))),
)


@dataclass(frozen=True)
class LdaEntry(AlgorithmEntry):
    """An entry whose ``parse`` also checks that the two weights sum to 1."""

    def parse(self, given: Mapping[str, Any]) -> dict[str, Any]:
        params = super().parse(given)
        if abs(params["w_icd"] + params["w_age"] - 1) > 1e-9:
            raise ParameterError("w_age", "must equal 1 − w_icd (the weights sum to 1)",
                                 given.get("w_age", params["w_age"]))
        return params


def trajectories_of(dataset: Dataset) -> list[list[tuple[str, int]]]:
    """Each patient's (code, age) pairs ordered by age; refuses non-longitudinal data.

    Raises
    ------
    InputError
        If a diagnosis has no age (naming how many and the first patient) or an age lies
        outside 1–128.
    """
    from ehr_release.model.dataset import AGE, CODE, PATIENT_ID

    diag = dataset.diagnoses
    source = dataset.source or None
    if not len(diag):
        raise InputError("LDA needs longitudinal data, but the dataset has no diagnoses",
                         file=source)
    missing = diag[AGE].isna().to_numpy()
    if missing.any():
        first = diag[missing].iloc[0]
        what = ("no diagnosis has an age" if missing.all()
                else f"{int(missing.sum())} of {len(diag)} diagnoses have no age")
        # Which patient and code: terminal-only detail (InputError.public() leaves it out of
        # everything stored), since the audit trail must never hold a patient's values.
        raise InputError(f"LDA needs longitudinal data (an age for every diagnosis): {what}",
                         file=source,
                         detail=f"first: patient {first[PATIENT_ID]!r}, code {first[CODE]!r}")
    ages = diag[AGE].to_numpy(dtype=np.int64)
    off = (ages < AGE_FIRST) | (ages > AGE_LAST)
    if off.any():
        first = diag[off].iloc[0]
        raise InputError(f"{int(off.sum())} diagnoses have an age outside the age hierarchy "
                         f"{AGE_FIRST}–{AGE_LAST}", file=source,
                         detail=f"first: age {int(first[AGE])} of patient "
                                f"{first[PATIENT_ID]!r} (code {first[CODE]!r})")
    return dataset.trajectories()


def _model(trajs: list[list[tuple[str, int]]], params: dict[str, Any], system: str):
    from ehr_release.algorithms.lda import make_model

    return make_model(code_hierarchy(system), [c for t in trajs for c, _ in t],
                      w_icd=params["w_icd"],
                      w_age=params["w_age"], leaf_count=params["leaf_count"])


def anonymize(name: str, dataset: Dataset, params: dict[str, Any]) -> ReleaseFiles:
    # Here, not at the top: the algorithm loads numba (0.25 s), and every run lists the
    # registry (``storage.budget.dp_algorithm_names``) whatever its own algorithm.
    from ehr_release.algorithms.lda import anonymize_trajectories
    from ehr_release.algorithms.lda.release import release_files

    trajs = trajectories_of(dataset)
    result = anonymize_trajectories(trajs, params["k"], _model(trajs, params, dataset.code_system),
                                    METHODS[name])
    meta = {"algorithm": name, "method": METHODS[name], "k": params["k"],
            "w_icd": params["w_icd"], "w_age": params["w_age"],
            "leaf_count": params["leaf_count"], "age_domain": [AGE_FIRST, AGE_LAST],
            "hierarchy": code_system(dataset.code_system).label}
    return release_files(dataset.patient_ids, result, meta)


PRIVACY_MODEL = ("k-anonymity of trajectories: every published sequence of (ICD code, age "
                 "block) pairs is shared by at least k patients, and generalizes, in order, "
                 "part of each one's own trajectory")

def make_entry(name: str, summary: str) -> LdaEntry:
    """The registry entry of ``name`` (``lda`` or ``lda-baseline``): same parameters,
    verifier and utility; only the alignment method differs (``METHODS``)."""
    return LdaEntry(
        name=name,
        summary=summary,
        privacy_model=PRIVACY_MODEL,
        params=PARAMS,
        anonymize=lambda ds, params, rng: anonymize(name, ds, params),
        verify=lazy("ehr_release.privacy.lda", "verify", algorithm=name),
        evaluate=lazy("ehr_release.utility.lda", "evaluate", algorithm=name),
        headline_loss="AvgRE",
        id_file=RECORDS_FILE,
        schema=SCHEMA,
        attack=lazy("ehr_release.privacy.attacks.lda", "attack"),
        count_records=count_records,
    )


ENTRY = make_entry(NAME, "LDA: cluster longitudinal (ICD, age) trajectories and publish each "
                   "cluster's A-GS alignment (generalize or suppress pairs)")
