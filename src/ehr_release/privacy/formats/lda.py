"""The closed-world declaration of an LDA release (``lda`` and ``lda-baseline``).

Two files: ``trajectories.jsonl``, one line per patient with its pseudonym and its published
trajectory, and ``lda.json``, the run's settings and the loss the algorithm measured. The
model's adversary knows a target's whole trajectory of (ICD code, age) pairs; ``fields_doc``
answers, per published field, whether that adversary could use it to narrow the target
beyond the published trajectory itself. The one field that carried data-dependent
information beyond the trajectory — a per-record ``cluster`` id numbered in the clustering's
formation order — was removed from the format (issue 14).
"""

from __future__ import annotations

import json
from itertools import repeat

from ehr_release.privacy.canonical_bytes import Rendering
from ehr_release.privacy.closed_world import (
    Enum,
    FileSchema,
    ListOf,
    Obj,
    ReleaseSchema,
    TupleOf,
)
from ehr_release.privacy.json_columns import parse_lines

RECORDS_FILE = "trajectories.jsonl"
META_FILE = "lda.json"

#: One published pair: ICD node name, then the age block as [first, last].
PAIR = TupleOf(("str", TupleOf(("int", "int"))))

RECORDS = FileSchema(
    name=RECORDS_FILE,
    format="jsonl",
    root=Obj({"patient_id": "str", "trajectory": ListOf(PAIR)}),
    rendering=Rendering(ensure_ascii=False, declared_order=True),
    doc="One line per patient: the release pseudonym and the published trajectory of "
        "generalized (ICD node, age block) pairs, in age order.",
    fields_doc={
        "patient_id": "Release-specific pseudonym (keyed HMAC of release id and source id): "
                      "the adversary cannot compute it from a trajectory, and it differs "
                      "between releases, so it neither narrows a patient nor joins releases.",
        "trajectory": "The k-anonymous content itself: identical trajectories form groups of "
                      "≥ k records; the adversary's candidate set for a target is every record "
                      "whose trajectory generalizes the target's in order, which always "
                      "includes the target's whole group.",
        "trajectory[][0]": "ICD node (a code or an ancestor up to the root): part of the "
                           "group's shared content, identical for every member.",
        "trajectory[][1]": "Age block [first, last] of the age hierarchy (2^l years aligned "
                           "to its size): shared by every member of the group.",
        "len(trajectory)": "The number of published pairs (suppressed pairs are dropped) is "
                           "the same for every member of a group, so it adds nothing to the "
                           "content; the original length is not published.",
        "line order": "Lines are ordered by pseudonym (the flow sorts them; the algorithm "
                      "already orders by patient id), so the order is data-independent; the "
                      "attack audit fails a release whose lines are not in that order.",
        "line bytes": "Each line is the canonical JSON rendering of its two fields (keys in "
                      "this order, default separators); the closed world and the attack "
                      "audit fail a release with any other spacing, escape or key order, "
                      "which could carry a bit per record.",
        "cluster (removed)": "Was a per-record cluster id in the order MDAV formed clusters "
                             "(the first starts at the record farthest from the most "
                             "frequent trajectory): data-dependent and redundant with the "
                             "trajectory, so it is no longer published.",
    },
    checked_by={
        "patient_id": "verifier: one record per patient (the pseudonym of each patient, "
                      "once); source ids (no source patient id in any file)",
        "trajectory": "verifier: truthful generalization (embeds in order into the "
                      "patient's own), k-anonymity; attack: candidates of every target",
        "trajectory[][0]": "verifier: release format (a node of the ICD hierarchy), "
                           "truthful generalization",
        "trajectory[][1]": "verifier: release format (a block of the age hierarchy), "
                           "truthful generalization",
        "len(trajectory)": "verifier: k-anonymity (identical trajectories, so identical "
                           "lengths in a group)",
        "line order": "attack: lines in pseudonym order",
        "line bytes": "closed world: canonical JSON Lines bytes; attack",
        "cluster (removed)": "closed world: no such field (an undeclared field fails)",
    },
)

META = FileSchema(
    name=META_FILE,
    format="json",
    rendering=Rendering(indent=2, sort_keys=True),
    root=Obj({
        "algorithm": Enum(("lda", "lda-baseline")),
        "method": Enum(("ags", "baseline")),
        "k": "int",
        "w_icd": "number",
        "w_age": "number",
        "leaf_count": Enum((0, 1)),
        "age_domain": TupleOf(("int", "int")),
        "hierarchy": Enum(("ICD-9-CM", "ICD-10-CM")),
    }),
    doc="The run's settings (parameters, hierarchies), which the verifier checks against "
        "the run's.",
    fields_doc={
        "algorithm": "Registry name of the algorithm: a constant of the request.",
        "method": "Alignment method (A-GS or Baseline): a constant of the algorithm.",
        "k": "The requested k: a parameter, not derived from the data.",
        "w_icd": "The requested ICD loss weight: a parameter.",
        "w_age": "The requested age loss weight: a parameter.",
        "leaf_count": "L(leaf) convention of the loss metric (0 or 1): a parameter.",
        "age_domain": "The age hierarchy's fixed domain [1, 128], not the data's ages.",
        "hierarchy": "Name of the ICD hierarchy (ICD-9-CM or ICD-10-CM, the extract's code "
                     "system): public.",
        "ilm, alm (removed)": "Were the average ICD and age loss: means over each "
                              "patient's original trajectory length, which the release "
                              "hides — figures of the original data the model does not "
                              "cover — that the verifier could check only within a "
                              "tolerance, leaving their last digits free. The utility "
                              "report keeps them.",
        "clusters (removed)": "Was the number of clusters; dropped with the per-record "
                              "cluster id (the number of distinct trajectories is visible "
                              "in the records anyway).",
    },
    checked_by={
        **dict.fromkeys(("algorithm", "method", "k", "w_icd", "w_age", "leaf_count",
                         "age_domain"),
                        "verifier: declared loss (equal to the verified settings)"),
        "hierarchy": "closed world: its one declared value",
        "ilm, alm (removed)": "closed world: no such field; verifier: declared loss (no loss "
                              "stated)",
        "clusters (removed)": "closed world: no such field (an undeclared field fails)",
    },
)

SCHEMA = ReleaseSchema((RECORDS, META))


def count_records(files: dict[str, bytes]) -> int:
    """Patients whose published trajectory keeps at least one pair.

    A line whose trajectory is empty (every pair suppressed) publishes nothing about its
    patient, so a release of only such lines counts as empty. Lines that are not JSON
    objects with a list ``trajectory`` are not counted (the closed-world check reports them).

    Read column-wise (:mod:`ehr_release.privacy.json_columns`): every line parsed by orjson
    at once and the trajectories' types compared as a set. A file orjson refuses (not
    UTF-8, ``NaN``, a Unicode-only blank line…) is counted line by line as before, with
    ``json.loads``; the count is the same either way.
    """
    data = files.get(RECORDS_FILE, b"")
    objects = parse_lines(data)
    if objects is None:
        return _count_lines(data)
    if set(map(type, objects)) <= {dict}:
        trajectories = list(map(dict.get, objects, repeat("trajectory")))
        if set(map(type, trajectories)) <= {list}:
            return sum(map(bool, trajectories))
    return sum(map(_counted, objects))


def _counted(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("trajectory"), list) \
        and bool(obj["trajectory"])


def _count_lines(data: bytes) -> int:
    count = 0
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        count += _counted(obj)
    return count
