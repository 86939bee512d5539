"""Registry glue for ``rmr``: Poulis et al. 2013's (k, k^m)-anonymity algorithm, ArtUC's
comparator (:mod:`ehr_release.algorithms.rmr`).

It takes ArtUC's parameters (the paper compares them at the same k, m, δ and ε) and reads the
same configuration: released attributes, their hierarchies and domains, and — new here — the
code hierarchy named by its ``codes: {hierarchy: …}`` entry (the shipped ICD-9-CM when absent),
along which RmR generalizes codes. The utility constraints are ignored by the algorithm and
the verifier; evaluation uses them to show how many records RmR leaves outside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ehr_release.configuration.limits import load_config_yaml, read_config_text
from ehr_release.core.errors import ConfigError
from ehr_release.parameters.params import OneOf, Param
from ehr_release.parameters.prepared import prepared
from ehr_release.privacy.formats.kkm import SCHEMA, count_records
from ehr_release.registry import AlgorithmEntry, ReleaseFiles
from ehr_release.registry.artuc import (
    PARAMS,
    PRIVACY_MODEL,
    attack,
    config_defaults,
    config_of,
    epsilon_of,
    evaluate,
    prepare_inputs,
    verifier,
)

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    import numpy as np

    from ehr_release.model.dataset import Dataset
    from ehr_release.model.hierarchy import Hierarchy

#: How RmR generalizes codes (``algorithms/rmr``'s CODE_MODELS, spelled here so parsing
#: parameters does not load the anonymizer; a test keeps them equal).
CODE_MODELS = ("hierarchy", "set")

NAME = "rmr"
REFERENCE = ("Poulis, Loukides, Gkoulalas-Divanis & Skiadopoulos, ECML PKDD 2013; the "
             "ArtUC paper's [61] and §5")

_HELP = {
    "delta": f"NCP bound δ: clusters are merged while the demographics' NCP stays ≤ δ "
             f"({REFERENCE})",
    "constraints": "YAML file whose 'constraints' list replaces the config's; RmR ignores "
                   "utility constraints, evaluation reports how many records meet them",
}
CODES = Param("codes", str, "how RmR generalizes each cluster's codes: hierarchy (Apriori "
              "Anonymization along the code hierarchy, as the ArtUC paper's Fig. 1c shows "
              "RmR's output) or set (any codes together, by GenDiag without code sets; a "
              "reading of the paper's 'set-valued generalization')", default="hierarchy",
              check=OneOf(CODE_MODELS))
RMR_PARAMS = (*(replace(p, help=_HELP[p.name]) if p.name in _HELP else p for p in PARAMS),
              CODES)


def _read_code_hierarchy(path: Path) -> Hierarchy:
    try:
        raw = load_config_yaml(read_config_text(path), str(path))  # size, depth: one line
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    codes = raw.get("codes") if isinstance(raw, Mapping) else None
    ref = codes.get("hierarchy", "icd9") if isinstance(codes, Mapping) else "icd9"
    from ehr_release.configuration.constraints import read_hierarchy_file

    return read_hierarchy_file(str(ref), path.parent)


def code_hierarchy_of(params: Mapping[str, Any]) -> Hierarchy:
    """The code hierarchy the configuration names (resolved as the configuration's parser
    resolves it: relative to the file, ``icd9`` by default): as the release's plan loaded
    it, else read now."""
    return prepared(params, "code_hierarchy",
                    lambda: _read_code_hierarchy(Path(params["config"]).resolve()))


def prepare_rmr_inputs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration and the code hierarchy, loaded once per release."""
    return {**prepare_inputs(params),
            "code_hierarchy": _read_code_hierarchy(Path(params["config"]).resolve())}


def rmr_release(dataset: Dataset, params: dict[str, Any],
                rng: np.random.Generator) -> ReleaseFiles:
    """RmR on ``dataset`` → its release files (also ArtUC's comparator)."""
    from ehr_release.algorithms.artuc import release_files
    from ehr_release.algorithms.rmr import rmr
    from ehr_release.configuration.constraints import rt_data

    config = config_of(params)
    anon = rmr(rt_data(dataset, config), config, code_hierarchy_of(params), k=params["k"],
               m=params["m"], delta=params["delta"],
               epsilon=epsilon_of(params, dataset), rng=rng,
               codes=params.get("codes", "hierarchy"))
    return release_files(anon)


ENTRY = AlgorithmEntry(
    name=NAME,
    summary="RmR (Poulis et al., ECML PKDD 2013): demographics clustered and merged under an "
            "NCP bound δ, each cluster's codes generalized along the code hierarchy; no "
            "utility constraints",
    privacy_model=PRIVACY_MODEL,
    params=RMR_PARAMS,
    anonymize=rmr_release,
    verify=verifier(NAME),
    evaluate=lambda files, original, params, rng: evaluate(NAME, files, original, params, rng),
    headline_loss="ARE W3",
    schema=SCHEMA,
    attack=attack,
    count_records=count_records,
    defaults_from=config_defaults,
    prepare=prepare_rmr_inputs,
)
