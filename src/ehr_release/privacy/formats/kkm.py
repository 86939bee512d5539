"""The (k, k^m) release format (artuc, artuc-baseline, artuc-unconstrained, rmr), as the
verifier reads it.

Two Parquet tables (issue 18: the JSON Lines file repeated every generalized code's member
list on every record, 1.84 GB at 208,387 records):

* ``generalized_codes.parquet`` — ``id``, ``codes``: each distinct generalized code of the
  release once, its codes sorted, numbered 0, 1, … in the sorted order of those lists;
* ``records.parquet`` — one row per released patient record: ``cluster``, one column per
  configured demographic (``[low, high]`` or a hierarchy node), ``generalized_codes`` (the
  record's ids, ascending).

The review asks of every published field: could an attacker who knows a patient's
demographics and up to m of their codes (the model's background knowledge) use it to narrow
the patient below k records? The answers are in ``fields_doc``. The per-record
``suppressed`` count published until issue 14 answered yes and was removed: knowing a code
missing from the patient's cluster, the attacker kept only the records with a non-zero count
(the spec's worked example: p5 from 2 candidates to 1).

The demographic columns are the configuration's attribute names, so the schema cannot list
them: every column between ``cluster`` and ``generalized_codes`` must be a ``[low, high]``
list or text, and the model verifier (:mod:`ehr_release.privacy.kkm`) rejects any name that
is not a configured attribute, as it rejects ids outside the code table, unused code-table
entries and any order but the documented one.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

from ehr_release.privacy.canonical_parquet import ParquetRendering
from ehr_release.privacy.closed_world import FileSchema, ListOf, OneOf, ReleaseSchema, Spec

RECORDS_FILE = "records.parquet"
CODES_FILE = "generalized_codes.parquet"
IDS_COLUMN = "generalized_codes"

#: The one writer configuration of both tables: the bytes must be exactly this rendering.
RENDERING = ParquetRendering(options=(
    ("compression", "zstd"), ("compression_level", 9), ("use_dictionary", True),
    ("write_statistics", False), ("store_schema", False), ("version", "2.6"),
    ("data_page_version", "1.0")))

#: A generalized demographic value: ``[low, high]`` (numerical) or a hierarchy node.
DEMOGRAPHIC_VALUE = OneOf((ListOf("number"), "str"))


def records_columns(files: Mapping[str, bytes]) -> dict[str, Spec]:
    """``cluster``, the demographic columns, the ids. The demographic columns are whatever the
    file names between the other two (the configuration decides them; the model verifier
    checks the names), each ``[low, high]`` if the file stores a list there, else text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(io.BytesIO(files[RECORDS_FILE]))
    demographics = {field.name: ListOf("number") if pa.types.is_list(field.type) else "str"
                    for field in schema if field.name not in ("cluster", IDS_COLUMN)}
    return {"cluster": "str", **demographics, IDS_COLUMN: ListOf("int")}


#: The demographic columns' row in the documentation (their names are the configuration's).
DEMOGRAPHIC_DOC = "<demographic> (one column per configured attribute, in configuration order)"


def records_review_keys(files: Mapping[str, bytes]) -> dict[str, str]:
    """Each demographic column of this release answers to the demographic review."""
    return {name: DEMOGRAPHIC_DOC for name in records_columns(files)
            if name not in ("cluster", IDS_COLUMN)}

FIELDS_DOC = {
    "cluster": (
        "The record's cluster, labelled C1, C2, … in the canonical order of the clusters "
        "(see row order), so the label is a function of the published content. No: every "
        "record of a cluster shows the same label, so it cannot tell a cluster's records "
        "apart; it does tell the attacker which cluster's generalization applies, and the "
        "attack audit uses it that way (records of one cluster are assumed to share its "
        "code vocabulary)."),
    DEMOGRAPHIC_DOC: (
        "The cluster's generalized value: [low, high] for a numerical attribute, a node of "
        "the attribute's hierarchy for a categorical one. The model verifier rejects a "
        "column that is not a configured attribute. No: a cluster-wide value (local "
        "recoding), never a record's own, and every class of identical demographics holds "
        "≥ k records."),
    IDS_COLUMN: (
        "The record's generalized codes, as ids of generalized_codes.parquet, ascending. "
        "No: inside each class every combination of ≤ m of them is shown by ≥ k records "
        "(the model), and the attack audit re-checks that no combination of ≤ m of a "
        "patient's codes leaves fewer than k candidates. Every id is in the code table."),
    "(suppressed codes)": (
        "Not published. A per-record count of the codes deleted from the record was a side "
        "channel (issue 14): an attacker knowing a code missing from the patient's cluster "
        "learned that the record is one that lost a code. Totals appear in the utility "
        "report only."),
    "(row order)": (
        "A function of the published content only: each cluster's rows sorted by their id "
        "lists, clusters sorted by (demographics in configuration order, their sorted id "
        "lists), each cluster's rows together. No: a row's position says nothing the row "
        "itself does not; an order by input position could have (e.g. input sorted by exact "
        "age). The verifier refuses any other order; the attack audit treats one as a "
        "per-record label."),
    "(identifiers)": (
        "None: records carry no patient id or pseudonym."),
    "(file metadata)": (
        "None: no key-value metadata (no pandas or Arrow schema note), no column "
        "statistics; fixed zstd compression, so identical content gives identical bytes. "
        "The closed world rejects a file that is not exactly this writer's rendering of its "
        "columns (bytes before the footer, other row groups, codecs or statistics)."),
}

CODES_DOC = {
    "id": (
        "0, 1, … in row order, which is the sorted order of the codes lists: a function of "
        "the published content. No: the numbering says nothing the lists do not."),
    "codes": (
        "One generalized code: the sorted codes it stands for, read as 'any non-empty "
        "subset'. No: it is listed only if some record shows it (the verifier refuses an "
        "unused entry, which could carry a suppressed patient's codes), and it is the same "
        "entry on every record of every cluster that holds it."),
    "(file metadata)": FIELDS_DOC["(file metadata)"],
}

_BYTES = "closed world: canonical Parquet bytes (this writer's rendering, no metadata)"

#: Which check pins each row down (see ``FileSchema.checked_by``).
RECORDS_CHECKED = {
    "cluster": "closed world: text; verifier (release format): labels C1, C2, … in row "
               "order, each cluster's rows together",
    DEMOGRAPHIC_DOC: "verifier (release format): exactly the configured attributes, in "
                     "order; (k, k^m)-anonymity and k-anonymity of the demographics; "
                     "attained bounds; utility constraints",
    IDS_COLUMN: "verifier (release format): ids of the code table, ascending, each once; "
                "(k, k^m)-anonymity, k^m-anonymity of the codes, held members; attack: "
                "every ≤ m-code knowledge set",
    "(suppressed codes)": "closed world: no such column (an undeclared column fails)",
    "(row order)": "verifier (release format): replays the documented order and refuses "
                   "any other",
    "(identifiers)": "closed world: no such column; verifier: source ids (no source "
                     "patient id in any file)",
    "(file metadata)": _BYTES,
}
CODES_CHECKED = {
    "id": "verifier (release format): 0, 1, … in row order",
    "codes": "verifier (release format): rows in the sorted order of their lists, every "
             "entry shown by some record; held members",
    "(file metadata)": _BYTES,
}

SCHEMA = ReleaseSchema(files=(
    FileSchema(
        name=RECORDS_FILE, format="parquet", columns_from=records_columns,
        review_keys_from=records_review_keys,
        codes_column=IDS_COLUMN, parquet_rendering=RENDERING,
        # for the documentation; the check derives the demographic columns' names
        columns={"cluster": "str", DEMOGRAPHIC_DOC: DEMOGRAPHIC_VALUE, IDS_COLUMN: ListOf("int")},
        doc="One row per released patient record: its cluster, its cluster's generalized "
            "demographics and the ids of its generalized diagnosis codes.",
        fields_doc=FIELDS_DOC, checked_by=RECORDS_CHECKED),
    FileSchema(
        name=CODES_FILE, format="parquet", parquet_rendering=RENDERING,
        columns={"id": "int", "codes": ListOf("str")},
        doc="Each generalized code of the release once: its id and the sorted codes it "
            "stands for (join on records' generalized_codes).",
        fields_doc=CODES_DOC, checked_by=CODES_CHECKED),
))


def count_records(files: dict[str, bytes]) -> int:
    """Patient records in a release: the rows of its records table (0 when it has none)."""
    import pyarrow.parquet as pq

    data = files.get(RECORDS_FILE)
    return pq.read_metadata(io.BytesIO(data)).num_rows if data else 0
