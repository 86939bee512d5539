"""Registry glue for ``gccens``: parameters, the population file, release files.

The population is a second dataset (file or MIMIC folder) named by the ``population``
parameter and read with the same readers as the input; it is read once per process per file
version, since anonymize, verify and evaluate each need it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ehr_release.algorithms.gccens import PopulationIndex, gccens, resolve_caps
from ehr_release.algorithms.gccens.inputs import check_sample_in_population
from ehr_release.algorithms.gccens.release import RECORDS_FILE, read_records, release_files
from ehr_release.errors import InputError, ParameterError
from ehr_release.hierarchy import normalize_icd9
from ehr_release.params import Interval, Param, Satisfies
from ehr_release.privacy.attacks.gccens import attack_kmap, declared_caps
from ehr_release.privacy.formats.gccens import SCHEMA
from ehr_release.privacy.gccens import verify_kmap
from ehr_release.registry import AlgorithmEntry, ReleaseFiles, prepared
from ehr_release.reports import AttackReport, UtilityReport, VerificationReport
from ehr_release.utility.gccens import evaluate_censoring

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    from ehr_release.dataset import Dataset

_CAP_ITEM = re.compile(r"^\s*([^:\s]+)\s*:\s*(-?\d+)\s*$")
CAPS_RULE = ("must be 'max', one integer cap ≥ 0 for every code, or CODE:CAP pairs "
             "separated by commas with caps ≥ 0 ('*:CAP' for unlisted codes)")


def parse_caps(text: str) -> dict[str, int]:
    """``"max"`` → {}; ``"3"`` → {"*": 3}; ``"250:2, *:0"`` → {"250": 2, "*": 0}.

    Raises
    ------
    ParameterError
        On anything else, including negative caps and a code listed twice.
    """
    text = text.strip()
    if text in {"", "max"}:
        return {}
    if re.fullmatch(r"-?\d+", text):
        return _checked({"*": int(text)}, text)
    out: dict[str, int] = {}
    for item in text.split(","):
        match = _CAP_ITEM.match(item)
        if match is None:
            raise ParameterError("caps", CAPS_RULE, text)
        code = match[1] if match[1] == "*" else normalize_icd9(match[1])
        if code in out:
            raise ParameterError("caps", f"lists code {code} more than once", text)
        out[code] = int(match[2])
    return _checked(out, text)


def _checked(caps: dict[str, int], text: str) -> dict[str, int]:
    if any(v < 0 for v in caps.values()):
        raise ParameterError("caps", CAPS_RULE, text)
    return caps


def _caps_ok(text: str) -> bool:
    try:
        parse_caps(text)
    except ParameterError:
        return False
    return True


PARAMS = (
    Param("k", int, "every released record is contained in ≥ k population records",
          check=Interval(int, 2)),
    Param("population", str, "dataset file or MIMIC folder of the population the sample "
          "was drawn from", check=Satisfies(lambda v: Path(v).exists(),
                    "must be an existing dataset file or folder")),
    Param("caps", str, "most instances of a code a record may keep: 'max' (no cap; the "
          "release states the policy, never the sample's maxima), an integer for all codes, "
          "or CODE:CAP,...,*:CAP", default="max", check=Satisfies(_caps_ok, CAPS_RULE)),
)


@dataclass(frozen=True)
class Population:
    """The population as GCCens needs it: ids, code multisets, and what identifies it."""

    ids: list[str]
    multisets: list[dict[str, int]]
    info: dict[str, Any]


def load_population(path: str) -> Population:
    """Read the population dataset at ``path``."""
    from ehr_release.ingest.readers import read_dataset

    p = Path(path).resolve()
    if not p.exists():
        raise InputError("population dataset does not exist", file=str(path))
    dataset = read_dataset(p)
    return Population(dataset.patient_ids, [dict(m) for m in dataset.code_multisets()],
                      {"records": dataset.n_patients, "fingerprint": dataset.fingerprint()})


def population_of(params: Mapping[str, Any]) -> Population:
    """The population as the release's plan loaded it once (a large one takes seconds to
    read: 301,423 records, ~10 s), else read now."""
    return prepared(params, "population", lambda: load_population(params["population"]))


def prepare_inputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"population": load_population(params["population"])}


def _anonymize(dataset: Dataset, params: dict[str, Any],
               rng: np.random.Generator) -> ReleaseFiles:
    sample = [dict(m) for m in dataset.code_multisets()]
    population = population_of(params)
    caps = parse_caps(params["caps"])
    initial = resolve_caps(sample, caps)
    check_sample_in_population(dataset.patient_ids, sample, population.ids,
                               population.multisets, initial, source=params["population"])
    index = PopulationIndex(population.multisets, codes=[c for c, v in initial.items() if v])
    result = gccens(sample, index, params["k"], caps)
    return release_files(dataset.patient_ids, result, k=params["k"], population=population.info)


def _verify(files: ReleaseFiles, original: Dataset, params: dict[str, Any]) -> VerificationReport:
    population = population_of(params)
    return verify_kmap(files, original.patient_ids, original.code_multisets(),
                       population.multisets, params["k"], parse_caps(params["caps"]),
                       population_info=population.info)


def _attack(files: ReleaseFiles, original: Dataset, params: dict[str, Any]) -> AttackReport:
    """The k-map attack audit on the population as already read for anonymize and verify.

    Only the input is shared (the same file through the same dataset reader): the attack's
    code is its own (:mod:`ehr_release.privacy.attacks.gccens`, whose ``attack`` reads the
    population itself when used outside the registry). Sharing it saves a second read of a
    large population (301,423 records: ~10 s).
    """
    population = population_of(params)
    return attack_kmap(files, original.patient_ids, original.code_multisets(),
                       population.multisets, params["k"], declared_caps(params["caps"]))


def count_records(files: ReleaseFiles) -> int:
    """Patient records in the release: the non-blank lines of ``censored.jsonl``."""
    return sum(1 for line in files.get(RECORDS_FILE, b"").split(b"\n") if line.strip())


def _evaluate(files: ReleaseFiles, original: Dataset, params: dict[str, Any],
              rng: np.random.Generator) -> UtilityReport:
    population = population_of(params)
    sample = [dict(m) for m in original.code_multisets()]
    released = dict(read_records(files[RECORDS_FILE]))
    records = [released.get(pid, {}) for pid in original.patient_ids]
    index = PopulationIndex(population.multisets, codes={c for r in sample for c in r})
    return evaluate_censoring(records, sample, index, params["k"], parse_caps(params["caps"]))


ENTRY = AlgorithmEntry(
    name="gccens",
    summary="GCCens: censor repeated diagnosis codes until every record is k-mapped to a "
            "population",
    privacy_model="k-map: every released code multiset is contained in at least k records of "
                  "the population the sample was drawn from",
    params=PARAMS,
    anonymize=_anonymize,
    verify=_verify,
    evaluate=_evaluate,
    headline_loss="CUL mean",
    id_file=RECORDS_FILE,
    schema=SCHEMA,
    attack=_attack,
    count_records=count_records,
    prepare=prepare_inputs,
)
