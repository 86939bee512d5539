"""The (k, k^m) release format (artuc, artuc-baseline, rmr), as the verifier reads it.

One file, ``records.jsonl``: one JSON object per released patient record, e.g.
``{"cluster": "C3", "demographics": {"age": [19, 30], "origin": "Europe", "gender": "All"},
"codes": [["053.20", "053.71"], ["493.2"], ["494.1"]]}``.

The review asks of every published field: could an attacker who knows a patient's
demographics and up to m of their codes (the model's background knowledge) use it to narrow
the patient below k records? The answers are in ``fields_doc``. The per-record
``suppressed`` count published until issue 14 answered yes and was removed: knowing a code
missing from the patient's cluster, the attacker kept only the records with a non-zero count
(the spec's worked example: p5 from 2 candidates to 1).

The demographics object's keys are the configuration's attribute names, so the schema cannot
list them; the model verifier (:mod:`ehr_release.privacy.kkm`) rejects any other key.
"""

from __future__ import annotations

from ehr_release.privacy.closed_world import (
    FileSchema,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    ReleaseSchema,
    TupleOf,
)

RECORDS_FILE = "records.jsonl"

#: A generalized demographic value: ``[low, high]`` (numerical) or a hierarchy node.
DEMOGRAPHIC_VALUE = OneOf((TupleOf(("number", "number")), "str"))

RECORD = Obj({
    "cluster": "str",
    "demographics": MapOf(DEMOGRAPHIC_VALUE),
    "codes": ListOf(ListOf("str")),
})

FIELDS_DOC = {
    "cluster": (
        "The record's cluster, labelled C1, C2, … in the canonical order of the clusters "
        "(see record order), so the label is a function of the published content. No: every "
        "record of a cluster shows the same label, so it cannot tell a cluster's records "
        "apart; it does tell the attacker which cluster's generalization applies, and the "
        "attack audit uses it that way (records of one cluster are assumed to share its "
        "code vocabulary)."),
    "demographics": (
        "The cluster's generalized demographics, one key per configured attribute (the "
        "model verifier rejects any other key). No: identical on every record of a cluster, "
        "and every class of identical demographics holds ≥ k records."),
    "demographics.*": (
        "[low, high] for a numerical attribute, a node of the attribute's hierarchy for a "
        "categorical one. No: a cluster-wide value (local recoding), never a record's own."),
    "codes": (
        "The record's generalized codes. No: inside each class every combination of ≤ m of "
        "them is shown by ≥ k records (the model), and the attack audit re-checks that no "
        "combination of ≤ m of a patient's codes leaves fewer than k candidates."),
    "codes[]": (
        "One generalized code: the sorted codes it stands for, read as 'any non-empty subset'. "
        "No: the same list on every record of the cluster that holds it; generalized codes "
        "are sorted within a record, so their order carries nothing."),
    "(suppressed codes)": (
        "Not published. A per-record count of the codes deleted from the record was a side "
        "channel (issue 14): an attacker knowing a code missing from the patient's cluster "
        "learned that the record is one that lost a code. Totals appear in the utility "
        "report only."),
    "(record order)": (
        "A function of the published content only: each cluster's lines are sorted by their "
        "text, clusters by their sorted lines. No: a line's position says nothing the line "
        "itself does not; an order by input position could have (e.g. input sorted by exact "
        "age). The attack audit treats any other order as a per-record label."),
    "(identifiers)": (
        "None: records carry no patient id or pseudonym."),
}

SCHEMA = ReleaseSchema(files=(
    FileSchema(
        name=RECORDS_FILE, format="jsonl", root=RECORD,
        doc="One line per released patient record: its cluster's generalized demographics "
            "and its generalized diagnosis codes.",
        fields_doc=FIELDS_DOC),
))


def count_records(files: dict[str, bytes]) -> int:
    """Patient records in a release: its non-blank lines (0 for an empty release)."""
    data = files.get(RECORDS_FILE, b"")
    return sum(1 for line in data.split(b"\n") if line.strip())
