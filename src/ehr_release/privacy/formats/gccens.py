"""The GCCens release format, as the verifier reads it: two files, nothing else.

The adversary of k-map holds the identified population and knows each target's record in it;
what k-map assumes they do NOT know is who is in the sample. So the question asked of every
field is twofold: does it narrow the population records a released record could be, and does
it tell who is in the sample? A field derived from the sample beyond the censored records
themselves (a list of the sample's codes, a per-code maximum, the censoring steps) answers
yes to the second and is not part of the format (issue 14, finding 2).
"""

from __future__ import annotations

from ehr_release.privacy.canonical_bytes import Rendering
from ehr_release.privacy.closed_world import FileSchema, MapOf, Obj, ReleaseSchema

RECORDS_FILE = "censored.jsonl"
META_FILE = "censoring.json"

RECORDS = FileSchema(
    name=RECORDS_FILE,
    format="jsonl",
    root=Obj({"patient_id": "str", "codes": MapOf("int")}),
    rendering=Rendering(ensure_ascii=False, declared_order=True),
    doc="One line per sample patient: the code multiset left after capping and censoring.",
    fields_doc={
        "patient_id": "A release-specific keyed pseudonym (HMAC of the source id), unrelated "
                      "to any population identifier: it links no line to a population record "
                      "and to no other release.",
        "codes": "The censored multiset (code → count ≥ 1). It is what k-map constrains: "
                 "contained in ≥ k population records, so the adversary's candidates for a "
                 "line number ≥ k. Codes are sorted, so key order carries nothing. Which "
                 "instances are censored is no free choice (issue 32): exactly what GCCens "
                 "leaves — every code clamped to its cap (declared, else the sample's "
                 "maximum); then, while a record has dis < k, among codes with cap ≥ 1 the "
                 "one held exactly cap times by the fewest records (ties: the lowest code in "
                 "string order) loses one instance in each of them and its cap drops by one. "
                 "A deterministic function of the sample, the population, k and the caps: "
                 "the verifier replays it with its own code and refuses any record censored "
                 "beyond or short of it (an extra instance dropped on chosen lines would "
                 "keep k-map and carry a bit per patient).",
        "(line order)": "Lines are sorted by patient_id, i.e. by a random pseudonym: the order "
                        "of the extract (admission or MRN order, which a population holder "
                        "could align with their own table) does not show. The verifier "
                        "refuses any other order (exact check, no key needed), and the "
                        "site's verifier, which holds the pseudonym key, that each line's "
                        "pseudonym is the one of the patient whose record it carries.",
        "(line bytes)": "Each line is exactly json.dumps of its two fields (keys in this "
                        "order, codes sorted, default separators, UTF-8 unescaped), ended by "
                        "one newline; the closed world refuses any other spacing, escape, "
                        "key order or repeated key, which could carry a value per record "
                        "(e.g. codes in the order they were recorded).",
        "(line count)": "The sample size: public in any k-map release (the sample is known "
                        "to exist); it tells nobody which population records are in it.",
    },
    checked_by={
        "patient_id": "verifier: one record per sample patient (the pseudonym of each sample "
                      "patient, once); source ids (no source patient id in any file)",
        "codes": "verifier: censoring only (no code or instance the patient lacks), caps "
                 "respected, k-map; censoring replayed (exactly the documented "
                 "deterministic censoring); closed world: canonical line bytes (codes sorted)",
        "(line order)": "verifier (line order): lines sorted by patient_id, the keyed "
                        "pseudonym the site verifier matches to each patient",
        "(line bytes)": "closed world: canonical JSON Lines bytes",
        "(line count)": "verifier: one record per sample patient",
    },
)

META = FileSchema(
    name=META_FILE,
    format="json",
    rendering=Rendering(indent=2, sort_keys=True),
    root=Obj({"k": "int", "caps": MapOf("int"),
              "population": Obj({"records": "int", "fingerprint": "str"})}),
    doc="The run's parameters (k, the caps policy) and which population the sample was "
        "mapped against; nothing derived from the sample.",
    fields_doc={
        "k": "A parameter chosen before the data was seen; says nothing about any patient.",
        "caps": "The caps policy as the owner declared it (code or '*' → most instances a "
                "record keeps; empty = 'max', no cap). A parameter, not the sample's code "
                "list or maxima (those told a population holder who is in the sample): it "
                "names only codes the owner chose, whatever the sample holds.",
        "population": "Describes the population table k-map is measured against (fields "
                      "below); nothing in it comes from the sample.",
        "population.records": "The population's size: the attacker's own table, public to "
                              "them by the model's assumption.",
        "population.fingerprint": "SHA-256 of the population's code multisets, sorted, so a "
                                  "verifier can check the release against the same "
                                  "population: the attacker's own table, nothing else — not "
                                  "the extract's ids, demographics, class or row order (a "
                                  "hash of those, sample members' included, would let "
                                  "whoever knows all but one value confirm it).",
    },
    checked_by={
        **dict.fromkeys(("k", "caps"), "verifier: parameters only (the run's k and caps "
                                       "policy as declared)"),
        "population": "verifier: population (the records and fingerprint of the population "
                      "verified here)",
    },
)

SCHEMA = ReleaseSchema(files=(RECORDS, META))
