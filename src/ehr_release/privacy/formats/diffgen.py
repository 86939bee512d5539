"""The closed-world declaration of a DiffGen release: ``groups.csv`` (or ``.parquet``),
``cut.json`` and ``ledger.json``.

DiffGen's guarantee is ε-differential privacy, so the per-field question "could an attacker
who knows the model's background knowledge use this to narrow a patient?" has one test:
is the field a function of the differentially private outputs (the mechanisms' draws, which
the ledger pays for) and of public inputs (the configuration, the parameters) only? Then
post-processing keeps it inside ε and the adversary -- who may know every other record --
learns at most e^ε about anyone. A field computed from the true data outside a mechanism
would be a side channel. The review of every field is in ``fields_doc``.

The groups table's columns are the run's predictors, which the public configuration picks;
they are derived from ``cut.json`` (its attribute names, then the class and count columns), so
a column ``cut.json`` does not name is undeclared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ehr_release.privacy.canonical_bytes import Rendering
from ehr_release.privacy.canonical_parquet import ParquetRendering
from ehr_release.privacy.closed_world import (
    Enum,
    FileSchema,
    ListOf,
    Nullable,
    Obj,
    OneOf,
    ReleaseSchema,
    TupleOf,
)

_DP_STRUCTURE = ("a function of the differentially private choices (exponential-mechanism "
                 "selections and split points, noisy emptiness tests) and the public "
                 "configuration only: post-processing, inside ε")


def _each(review: str, *paths: str) -> dict[str, str]:
    """The same review for several fields that answer the question the same way."""
    return dict.fromkeys(paths, review)


def groups_columns(files: Mapping[str, bytes]) -> dict[str, str]:
    """The groups table's columns as ``cut.json`` declares them: predictors, class, count."""
    cut = json.loads(files["cut.json"])
    names = [str(a["name"]) for a in cut["attributes"]]
    return {**{n: "str" for n in names}, str(cut["class"]["column"]): "str",
            str(cut["count_column"]): "int"}


PREDICTOR_DOC = "<predictor> (one column per attribute of cut.json)"
CLASS_DOC = "<class column>"


def groups_review_keys(files: Mapping[str, bytes]) -> dict[str, str]:
    """Each derived column of the groups table → its review row (predictor, class, count)."""
    cut = json.loads(files["cut.json"])
    return {**{str(a["name"]): PREDICTOR_DOC for a in cut["attributes"]},
            str(cut["class"]["column"]): CLASS_DOC, str(cut["count_column"]): "count"}


_GROUPS_DOC = {
    PREDICTOR_DOC:
        "the generalized value of the group: a node of the released cut, an interval of it, "
        "or a cut-set; which groups exist is " + _DP_STRUCTURE + ". Every partition the "
        "specializations create is listed, empty or not (the verifier fails a missing one), "
        "so a group's presence says nothing about its true count.",
    CLASS_DOC: "each group is listed once per declared class value (public), in the "
                      "configuration's order.",
    "count": "the true count plus discrete Laplace noise of the ledger's final-counts scale, "
             "clamped at 0 (post-processing); the verifier tests the residuals against the "
             "declared noise law: not implausibly often near 0, and two-sided in fit, mean, "
             "variance and residues mod 2, 3, 4.",
    "row order": "sorted by the labels alone (taxonomy order of categorical nodes, interval "
                 "start, cut-set label), never by count; the attack audit re-checks this.",
}

#: Which check pins each row of the groups table down (see ``FileSchema.checked_by``).
_GROUPS_CHECKED = {
    PREDICTOR_DOC: "closed world: exactly cut.json's attributes, in its order; verifier: "
                   "released values public (a label of the released cut), groups complete",
    CLASS_DOC: "verifier: released values public (a declared class value); attack: every "
               "class of a group, in the configuration's order",
    "count": "verifier: released values public (integer ≥ 0); counts noisy (the "
             "small-residual test and two-sided tests of the residuals' fit, mean, variance "
             "and residues mod 2, 3, 4 against the declared discrete Laplace)",
    "row order": "attack: rows sorted by their labels in a public order",
}
GROUPS_CSV = FileSchema(
    name="groups.csv", format="csv", optional=True, columns_from=groups_columns,
    review_keys_from=groups_review_keys,
    doc="the released equivalence groups: generalized predictors, class value, noisy count",
    fields_doc=_GROUPS_DOC,
    checked_by={**_GROUPS_CHECKED, "row order": _GROUPS_CHECKED["row order"]
                + "; closed world: canonical CSV rendering (quoting, spelling of numbers)"})
GROUPS_PARQUET = FileSchema(
    name="groups.parquet", format="parquet", optional=True, columns_from=groups_columns,
    review_keys_from=groups_review_keys,
    metadata=("ARROW:schema", "pandas"), parquet_rendering=ParquetRendering(via_pandas=True),
    doc="the same groups as groups.csv, as Parquet (one of the two is published)",
    fields_doc={**_GROUPS_DOC,
                "(file metadata)": "only the `pandas` and `ARROW:schema` notes pandas writes "
                                   "(column names and types, index, library versions), read "
                                   "by pandas to restore the table; any other key-value "
                                   "metadata fails the closed world, and so does any file "
                                   "that is not exactly pandas' rendering of its columns "
                                   "(a note's content, bytes before the footer, row "
                                   "groups, statistics: none may differ)."},
    checked_by={**_GROUPS_CHECKED,
                "(file metadata)": "closed world: declared notes only, canonical bytes "
                                   "(pandas' rendering of the columns)"})

_CATEGORICAL = Obj({"name": "str", "kind": Enum(("categorical",)), "cut": ListOf("str"),
                    "taxonomy_root": "str"})
_NUMERICAL = Obj({"name": "str", "kind": Enum(("numerical",)),
                  "domain": Obj({"domain": TupleOf(("number", "number")), "integer": "bool"}),
                  "cut": ListOf("str"), "intervals": ListOf(TupleOf(("number", "number")))})
_SET_VALUED = Obj({"name": "str", "kind": Enum(("set-valued",)), "cut": ListOf("str"),
                   "taxonomy": Obj({"taxonomy": "str", "depth": Nullable("int"),
                                    "max_fanout": Nullable("int")}),
                   "taxonomy_root": "str", "separator": "str", "empty": "str"})

CUT_JSON = FileSchema(
    name="cut.json", format="json",
    rendering=Rendering(indent=2, ensure_ascii=False, declared_order=True),
    root=Obj({"algorithm": Enum(("diffgen",)), "configuration": "str",
              "parameters": Obj({"epsilon": "str", "h": "int", "score": "str",
                                 "unused_budget": "str"}),
              "epsilon_prime": "str",
              "class": Obj({"column": "str", "values": ListOf("str")}),
              "count_column": "str",
              "attributes": ListOf(OneOf((_CATEGORICAL, _NUMERICAL, _SET_VALUED)))}),
    doc="the run's public description: parameters, class values and the final cut per "
        "attribute (what a data user generalizes test records with)",
    fields_doc={
        "algorithm": "a constant.",
        "configuration": "the name of the shipped public configuration the requester chose, "
                         "or the file name (no folders) of the one they gave; not derived "
                         "from the data.",
        **_each("the requested ε, h, score and unused-budget policy: public inputs.",
                "parameters", "parameters.epsilon", "parameters.h", "parameters.score",
                "parameters.unused_budget"),
        "epsilon_prime": "ε/(2·(|numerical| + 2h)): computed from the parameters.",
        **_each("the configuration's class attribute and its declared values (every value, "
                "present in the data or not, in the configuration's order).",
                "class", "class.column", "class.values"),
        "count_column": "a constant column name.",
        "attributes": "one entry per predictor: its public configuration (name, kind, "
                      "taxonomy root and source, numerical domain, cut-set label syntax) and "
                      "its final cut (labels and intervals), which is " + _DP_STRUCTURE
                      + "; sorted by label or interval, not by any count.",
    },
    checked_by={
        "algorithm": "closed world: its one declared value",
        **_each("verifier: public description fixed (equal to the parameters and the "
                "configuration, in its one spelling)", "configuration", "parameters",
                "class", "count_column"),
        "epsilon_prime": "verifier: ε' derivation; public description fixed",
        "attributes": "verifier: public description fixed (configuration, cut in label "
                      "order, domains, intervals), released values public (the cut is the "
                      "ledger's replay); attack: cut in label order",
    })

_DETAIL = OneOf((
    Obj({"attribute": "str", "interval": "str", "point": "number"}),
    Obj({"attribute": "str", "kind": "str", "value": "str", "children": ListOf("str")}),
    Obj({"attribute": "str", "kind": "str", "value": "str", "point": "number",
         "children": ListOf("str")}),
    Obj({"node": "str", "combinations": "int", "threshold": "number"}),
    Obj({"groups": "int", "policy": "str"}),
))
_CHARGE = Obj({
    "index": "int", "step": "int",
    "phase": Enum(("initial-split", "selection", "split", "emptiness", "final-counts")),
    "mechanism": Enum(("laplace", "exponential")), "epsilon": "str", "epsilon_float": "number",
    "sensitivity": "str", "scale": "number", "scope": Enum(("sequential", "parallel")),
    "group": Nullable("str"), "touched": "str", "detail": _DETAIL})
_EVENT = OneOf((Obj({"step": "int", "event": "str"}),
                Obj({"step": "int", "event": "str", "attribute": "str"}),
                Obj({"step": "int", "event": "str", "skipped_steps": "int"})))

LEDGER_JSON = FileSchema(
    name="ledger.json", format="json",
    rendering=Rendering(indent=2, ensure_ascii=False, declared_order=True),
    root=Obj({"algorithm": Enum(("diffgen",)), "neighbouring": "str",
              "noise": Enum(("opendp", "seeded-numpy (test mode)")), "epsilon": "str",
              "h": "int", "numerical_predictors": "int", "epsilon_prime": "str",
              "unused_budget": "str", "total_budget": "str", "spent": "str",
              "spent_float": "number", "charges": ListOf(_CHARGE), "events": ListOf(_EVENT)}),
    doc="every mechanism invocation of the run, its ε, scale, scope, and the composed total",
    fields_doc={
        **_each("a parameter of the run or the public configuration's shape.",
                "algorithm", "neighbouring", "epsilon", "h", "numerical_predictors",
                "epsilon_prime", "unused_budget", "total_budget"),
        "noise": "which sampler drew every draw of the run: opendp (OpenDP, seeded from the "
                 "operating system's entropy; the production path) or the seeded test-mode "
                 "generator, whose draws anyone with the seed replays (such a release is not "
                 "private, and says so); a fact about the run, never about the data: the "
                 "verifier requires the one the run's seed parameter gives.",
        **_each("the composition of the charges: computed from the ledger, re-checked by the "
                "verifier.", "spent", "spent_float"),
        **_each("the budget accounting of one invocation: determined by the parameters and "
                "by which steps the DP selections chose; no count enters it.",
                "charges", "charges[].index", "charges[].step", "charges[].phase",
                "charges[].mechanism", "charges[].epsilon", "charges[].epsilon_float",
                "charges[].sensitivity", "charges[].scale", "charges[].scope",
                "charges[].group"),
        "charges[].touched": "fixed text naming the attribute, interval or node a charge "
                             "touched (the final counts: how many released groups); no "
                             "record count, no number the release does not determine.",
        "charges[].detail": "what the step did: the DP selection (attribute, value, kind, "
                            "the public taxonomy's children), a split point drawn by the "
                            "exponential mechanism (paid in the same charge, published even "
                            "when unused), sizes of the cut and partition structure "
                            "(combinations, groups: " + _DP_STRUCTURE
                            + "), an emptiness test's public threshold √2/ε', the "
                            "unused-budget policy. No number of candidates a selection chose "
                            "from, nor of partitions an emptiness test covered or kept: which "
                            "exist depends on partitions a later emptiness test may drop "
                            "entirely, which the release does not show, so no verifier could "
                            "check them (the verifier fails a detail field its replay does not "
                            "give).",
        "events": "steps that spent nothing (a categorical specialization, an unsplittable "
                  "interval, an early stop when no candidate is left): " + _DP_STRUCTURE
                  + ".",
    },
    checked_by={
        "algorithm": "closed world: its one declared value",
        "noise": "verifier: public description fixed (the sampler the seed parameter gives)",
        **_each("verifier: public description fixed (equal to the parameters and the "
                "configuration, in its one spelling)", "neighbouring", "epsilon", "h",
                "numerical_predictors", "epsilon_prime", "unused_budget", "total_budget"),
        "spent": "verifier: ε composition (recomputed, ≤ ε), public description fixed",
        "spent_float": "verifier: ledger text fixed (the replay's number)",
        "charges": "verifier: charges complete and scoped (replays Algorithm 1's charges), "
                   "ledger text fixed (every text and number as replayed), noise calibrated",
        "charges[].detail": "verifier: charges complete and scoped, ledger text fixed (no "
                            "field the replay does not give; a split point strictly inside "
                            "its interval, in its one spelling — the digits of a real-valued "
                            "point are the mechanism's free draw)",
        "events": "verifier: ledger text fixed (exactly the replay's events)",
    })


SCHEMA = ReleaseSchema(files=(GROUPS_CSV, GROUPS_PARQUET, CUT_JSON, LEDGER_JSON))
