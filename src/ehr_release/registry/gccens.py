"""Registry glue for ``gccens``: parameters, the population file, release files.

The population is a second dataset (file or MIMIC folder) named by the ``population``
parameter and read with the same readers as the input (:mod:`ehr_release.ingest.population`);
the release's plan reads it once and anonymize, verify, attack and evaluate all take it from
there. The verifier, attack and evaluation are the family's shared entry points, wired
with :func:`~ehr_release.registry.lazy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ehr_release.algorithms.gccens import PopulationIndex, gccens, resolve_caps
from ehr_release.algorithms.gccens.inputs import check_sample_in_population
from ehr_release.algorithms.gccens.release import RECORDS_FILE, release_files
from ehr_release.configuration.caps import CAPS_RULE, caps_ok, parse_caps
from ehr_release.core.errors import InputError
from ehr_release.ingest import population as population_input
from ehr_release.parameters.params import Interval, Param, Satisfies
from ehr_release.privacy.formats.gccens import SCHEMA
from ehr_release.registry import AlgorithmEntry, ReleaseFiles, lazy

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    from ehr_release.model.dataset import Dataset

PARAMS = (
    Param("k", int, "every released record is contained in ≥ k population records",
          check=Interval(int, 2), example="5"),
    Param("population", str, "dataset file or MIMIC folder of the population the sample "
          "was drawn from", check=Satisfies(lambda v: Path(v).exists(),
                    "must be an existing dataset file or folder"),
          site_path=True, example="population.csv"),
    Param("caps", str, "most instances of a code a record may keep: 'max' (no cap; the "
          "release states the policy, never the sample's maxima), an integer for all codes, "
          "or CODE:CAP,...,*:CAP", default="max", check=Satisfies(caps_ok, CAPS_RULE)),
)


def prepare_inputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"population": population_input.load_population(params["population"])}


def _anonymize(dataset: Dataset, params: dict[str, Any],
               rng: np.random.Generator) -> ReleaseFiles:
    sample = [dict(m) for m in dataset.code_multisets()]
    population = population_input.population_of(params)
    if population.code_system != dataset.code_system:
        raise InputError(f"the population is coded in {population.code_system} but the "
                         f"extract in {dataset.code_system}: both must use one code system",
                         file=str(params["population"]))
    caps = parse_caps(params["caps"])
    initial = resolve_caps(sample, caps)
    check_sample_in_population(dataset.patient_ids, sample, population.ids,
                               population.multisets, initial, source=params["population"])
    index = PopulationIndex(population.multisets, codes=[c for c, v in initial.items() if v])
    result = gccens(sample, index, params["k"], caps)
    return release_files(dataset.patient_ids, result, k=params["k"], population=population.info)


def count_records(files: ReleaseFiles) -> int:
    """Patient records in the release: the non-blank lines of ``censored.jsonl``."""
    return sum(1 for line in files.get(RECORDS_FILE, b"").split(b"\n") if line.strip())


ENTRY = AlgorithmEntry(
    name="gccens",
    summary="GCCens: censor repeated diagnosis codes until every record is k-mapped to a "
            "population",
    privacy_model="k-map: every released code multiset is contained in at least k records of "
                  "the population the sample was drawn from",
    params=PARAMS,
    anonymize=_anonymize,
    verify=lazy("ehr_release.privacy.gccens", "verify"),
    evaluate=lazy("ehr_release.utility.gccens", "evaluate"),
    headline_loss="CUL mean",
    id_file=RECORDS_FILE,
    schema=SCHEMA,
    attack=lazy("ehr_release.privacy.attacks.gccens", "attack"),
    count_records=count_records,
    prepare=prepare_inputs,
)
