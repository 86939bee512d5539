"""The published bytes of a DiffGen run: groups, cut and ledger.

* ``groups.csv`` (or ``groups.parquet``) -- one row per equivalence group: the generalized
  value of every predictor, the class value and the noisy count (integer, ≥ 0).
* ``cut.json`` -- the run's public description: parameters, class values, and per attribute
  its kind, public domain or taxonomy and the final cut (what test records are generalized
  with).
* ``ledger.json`` -- every mechanism invocation and the composed total.

Serialization is deterministic so the same result always gives the same bytes (and hashes).
"""

from __future__ import annotations

import io
import json
from typing import Any

from ehr_release.algorithms.diffgen.core import COUNT_COLUMN, DiffGenParams, DiffGenResult
from ehr_release.algorithms.diffgen.encode import EMPTY_SET, SET_SEPARATOR
from ehr_release.algorithms.diffgen.ledger import fraction_text
from ehr_release.configuration.taxonomies import DiffGenConfig

GROUPS_CSV, GROUPS_PARQUET = "groups.csv", "groups.parquet"
CUT_JSON, LEDGER_JSON = "cut.json", "ledger.json"
FORMATS = ("csv", "parquet")


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def cut_document(result: DiffGenResult, config: DiffGenConfig,
                 params: DiffGenParams) -> dict[str, Any]:
    """The content of ``cut.json``."""
    attributes = []
    for entry in result.cut:
        entry = dict(entry)
        name = entry["name"]
        if entry["kind"] == "categorical":
            entry["taxonomy_root"] = config.categorical[name].root
        elif entry["kind"] == "set-valued":
            tax = config.set_valued[name]
            entry.update(taxonomy=tax.as_dict(), taxonomy_root=tax.tree.root,
                         separator=SET_SEPARATOR, empty=EMPTY_SET)
        attributes.append(entry)
    return {
        "algorithm": "diffgen",
        "configuration": config.source,
        "parameters": {"epsilon": fraction_text(params.epsilon), "h": params.h,
                       "score": params.score, "unused_budget": params.unused_budget},
        "epsilon_prime": fraction_text(result.epsilon_prime),
        "class": {"column": config.class_column, "values": list(config.class_values)},
        "count_column": COUNT_COLUMN,
        "attributes": attributes,
    }


def ledger_document(result: DiffGenResult, params: DiffGenParams,
                    n_numerical: int) -> dict[str, Any]:
    """The content of ``ledger.json``."""
    return {
        "algorithm": "diffgen",
        "neighbouring": "add/remove one record",
        "noise": result.noise,
        "epsilon": fraction_text(params.epsilon),
        "h": params.h,
        "numerical_predictors": n_numerical,
        "epsilon_prime": fraction_text(result.epsilon_prime),
        "unused_budget": params.unused_budget,
        **result.ledger.to_dict(),
    }


def release_files(result: DiffGenResult, config: DiffGenConfig, params: DiffGenParams,
                  fmt: str = "csv") -> dict[str, bytes]:
    """File name → bytes of the release."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if fmt == "csv":
        buf = io.StringIO()
        result.groups.to_csv(buf, index=False, lineterminator="\n")
        groups = {GROUPS_CSV: buf.getvalue().encode("utf-8")}
    else:
        raw = io.BytesIO()
        result.groups.to_parquet(raw, index=False)
        groups = {GROUPS_PARQUET: raw.getvalue()}
    return {**groups,
            CUT_JSON: _json(cut_document(result, config, params)),
            LEDGER_JSON: _json(ledger_document(result, params, len(config.numerical)))}
