"""The release certificate: one PDF a privacy officer can read, sign off and file.

It is the *internal* governance record: it shows figures computed on the true data (what the
verifier measured, the attack audit's smallest candidate set, utility against the original),
which are outside the privacy model. It never leaves with the data; the recipient gets the
datasheet (:mod:`ehr_release.documents.datasheet`), which carries only data-independent facts and
facts readable from the released bytes themselves.

Its first page is a plain-language summary for someone who will not read the rest: what is
released (files, fields, records), to whom, for what, on what terms and until when, the
guarantee in one sentence, the verification and attack results, utility in words — flagged
in red when the evaluation found it below a trivial baseline — and where the request came
from. The pages after it state the recorded facts in full — the dataset fingerprint, the
parameters as validated, the verifier's requirements with what it measured, the utility
figures with what each means, the SHA-256 of every released file, the reviewer's decision
and the head of the audit chain. It is rendered twice: a *draft* for the reviewer before the
decision (watermarked, no approval block), and the final one filed with the run.

Every table fits the page and keeps its header: a table wider than :data:`MAX_COLUMNS`
columns is split into column groups, each repeating the label column (never turned on its
side, which put numbers in the header row), every header row repeats on each page the table
runs onto, header words are never broken, and the stylesheet wraps long cells instead of
letting them run past the margin (``tests/test_certificate_layout.py`` and
``tests/test_document_tables.py`` render the documents and check each table on each page).
Utility reads in words on page 1 — a few key measures, each with its scale from the measures
registry (:mod:`ehr_release.documents.measures`) — and every figure and table is in Appendix A.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ehr_release.documents.datasheet import DatasheetFile
from ehr_release.documents.measures import describe, explain, key_measures, shown_value
from ehr_release.documents.plain import (
    baseline_words,
    code_edition,
    code_mapping_words,
    format_number,
    guarantee_sentence,
    human_type,
    no_better_than_nothing,
    records_words,
    verification_limits,
)
from ehr_release.documents.rendering import environment, html_to_pdf, stylesheet
from ehr_release.model.reports import Chart, ReleaseOutcome, UtilityReport, VerificationReport
from ehr_release.planning.request import DataUse
from ehr_release.version import software_version

__all__ = ["ApprovalBlock", "CertificateContext", "environment", "html_to_pdf",
           "render_certificate_html", "render_certificate_pdf", "short", "summary"]

#: Rows of a utility table shown in the certificate; the full table is in the database.
MAX_TABLE_ROWS = 25
#: A table with more columns than this is split into column groups of this many columns,
#: each repeating the first (label) column: ArtUC's comparison has 15 figures per algorithm,
#: which no A4 page holds side by side.
MAX_COLUMNS = 6
#: Field names listed per released file on the first page; the datasheet lists them all.
MAX_SUMMARY_FIELDS = 6
#: The dataset's diagnosis-code column (see :meth:`ehr_release.model.dataset.Dataset.schema`).
CODES_COLUMN = "codes"
#: The schema key of a GEM mapping's losses (:data:`ehr_release.model.dataset.CODE_MAPPING`).
CODE_MAPPING = "code_mapping"



@dataclass(frozen=True)
class ApprovalBlock:
    """The reviewer's recorded decision, as it appears on the final certificate."""

    reviewer: str
    decision: str
    reason: str
    decided_at: datetime
    channel: str = "cli"
    role: str | None = None


@dataclass(frozen=True)
class CertificateContext:
    """Everything a certificate shows; built by the certify stage from the database.

    ``released`` describes each released file as the datasheet does (declared format and
    fields); ``released_columns`` maps each file to the source columns that appear in it
    by name (header or key), so the certificate can say which input columns left.
    ``parameter_help`` is each parameter's declared meaning; ``headline_loss`` the utility
    figure a comparison ranks by, read out on the first page.
    """

    run_id: str
    created_at: datetime
    requester: str
    dataset_source: str
    dataset_fingerprint: str
    dataset_rows: int
    dataset_schema: dict[str, str]
    algorithm: str
    algorithm_summary: str
    privacy_model: str
    parameters: dict[str, Any]
    verification: VerificationReport
    utility: UtilityReport
    manifest: list[tuple[str, str, int]]
    approval: ApprovalBlock | None
    audit_head: str
    audit_events: int
    status: str
    outcome: ReleaseOutcome | None = None
    data_use: DataUse = DataUse()
    destination: str = ""
    software_version: str = field(default_factory=software_version)
    released: list[DatasheetFile] = field(default_factory=list)
    released_columns: dict[str, list[str]] = field(default_factory=dict)
    parameter_help: dict[str, str] = field(default_factory=dict)
    headline_loss: str | None = None
    #: ε already spent on the same extract by other DP releases (None: not a DP release).
    epsilon_account: str | None = None
    #: Made on a test site (:mod:`ehr_release.storage.site`): page 1 says so.
    test_site: bool = False

    @property
    def is_draft(self) -> bool:
        return self.approval is None

    @property
    def code_system(self) -> str | None:
        """The source's diagnosis code system and edition (ICD-9-CM or ICD-10-CM)."""
        return code_edition(self.dataset_schema)

    @property
    def code_mapping(self) -> str | None:
        """The GEM mapping of ICD-9-CM codes and what it lost (counts), if one was made."""
        return code_mapping_words(self.dataset_schema, losses=True)


# --------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class DisplayTable:
    """A utility table as printed: header, cells already in words, rows left out; ``part``
    says which columns a column group holds ("" when the table is whole)."""

    name: str
    header: list[str]
    rows: list[list[str]]
    total: int
    part: str = ""


def fit_table(name: str, rows: Sequence[Mapping[str, Any]], algorithm: str = ""
              ) -> list[DisplayTable]:
    """Shape a utility table for the page: too many columns → column groups.

    Each group repeats the first column (what a row is: an algorithm, a query size) so no
    figure is printed away from its row's label and its column's name; figures are printed
    as the measures registry says (shares as percentages).
    """
    columns = list(dict.fromkeys(k for row in rows for k in row))
    shown = rows[:MAX_TABLE_ROWS]

    def cells(cols: Sequence[str]) -> list[list[str]]:
        return [[shown_value(algorithm, c, r[c]) if c in r else "—" for c in cols]
                for r in shown]

    if len(columns) <= MAX_COLUMNS:
        return [DisplayTable(name, columns, cells(columns), len(rows))]
    label, rest = columns[0], columns[1:]
    count = -(-len(rest) // (MAX_COLUMNS - 1))  # as few groups as fit, of even widths
    bounds = [round(i * len(rest) / count) for i in range(count + 1)]
    return [DisplayTable(name, [label, *rest[a:b]], cells([label, *rest[a:b]]), len(rows),
                         part=f"columns {a + 1}–{b} of {len(rest)}")
            for a, b in zip(bounds, bounds[1:], strict=False)]


# --------------------------------------------------------------------------- first page
@dataclass(frozen=True)
class ReleasedLine:
    """One released file on the first page: what it is, its fields, source columns in it
    that its field names do not already show (e.g. the demographics a map holds)."""

    name: str
    what: str
    fields: str
    columns: str


@dataclass(frozen=True)
class Verdict:
    """A check's outcome as the first page prints it: the word, then what it rests on."""

    passed: bool
    detail: str

    @property
    def word(self) -> str:
        return "PASSED" if self.passed else "FAILED"


@dataclass(frozen=True)
class Summary:
    """The first page in plain words (see the module docstring).

    ``below_baseline`` are the evaluation's own sentences, shown in a red box; when the
    request waived them, ``low_utility_waived`` says so there, and ``waivers`` keeps only
    the other waivers (an empty release), so no sentence is printed twice.
    """

    released: list[ReleasedLine]
    records: str
    guarantee: str
    verification: Verdict
    attack: Verdict | None
    utility: str
    below_baseline: list[str]
    #: The key measures in words, each with its scale
    #: (:func:`ehr_release.documents.measures.describe`).
    measures: list[str]
    low_utility_waived: bool
    waivers: list[str]
    provenance: str


#: Free text (recipient, purpose, terms) longer than this is cut on the first page; the
#: full text is in section 1.
MAX_SUMMARY_TEXT = 120


def short(text: str | None, missing: str = "not stated in the request") -> str:
    """User text for the first page: whole when short, else cut at a word with a pointer."""
    if not text:
        return missing
    if len(text) <= MAX_SUMMARY_TEXT:
        return text
    cut = text[:MAX_SUMMARY_TEXT].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut} … (full text in section 1)"


def _first_sentence(text: str) -> str:
    head = text.split(". ")[0].strip().rstrip(".")
    return head[:1].upper() + head[1:] + "." if head else ""


def _field_names(f: DatasheetFile) -> list[str]:
    return [r.path for r in f.fields
            if r.kind != "–" and "." not in r.path and "[" not in r.path
            and not r.path.startswith("(")]


def _released_line(f: DatasheetFile, columns: list[str]) -> ReleasedLine:
    names = _field_names(f)
    more = len(names) - MAX_SUMMARY_FIELDS
    fields = ", ".join(names[:MAX_SUMMARY_FIELDS]) + (f" and {more} more" if more > 0 else "")
    hidden = [c for c in columns if c not in names]
    return ReleasedLine(f.name, _first_sentence(f.doc), fields, ", ".join(hidden))


def _attack_verdict(outcome: ReleaseOutcome | None, noise_audit: bool) -> Verdict | None:
    """``noise_audit``: the guarantee rests on a mechanism's randomness (ε-DP), so the attack
    counts no candidate sets; it audits the published values against the noise promised."""
    attack = outcome.attack if outcome else None
    if attack is None:
        return None
    if noise_audit:
        return Verdict(attack.passed, f"an independent audit ({attack.attacker_model}) "
                                      f"checked {format_number(attack.knowledge_sets_tried)} "
                                      f"published values against "
                                      f"{attack.required or 'what the mechanism allows'}; "
                                      f"{attack.measured or 'nothing found'}. It can catch a "
                                      "release that bypassed the mechanism, not prove the "
                                      "guarantee.")
    tried = (f"{format_number(attack.knowledge_sets_tried)} background-knowledge sets "
             f"({'every one' if attack.exhaustive else 'a seeded sample plus every rare one'})")
    if attack.smallest_candidate_set is not None:
        found = (f"the smallest group a patient could be narrowed to was "
                 f"{format_number(attack.smallest_candidate_set)} records (at least "
                 f"{format_number(attack.threshold)} required)")
    else:
        found = attack.measured or "no patient was singled out"
    return Verdict(attack.passed, f"an independent re-identification attack "
                                  f"({attack.attacker_model}) tried {tried}; {found}.")


def _utility_words(ctx: CertificateContext) -> str:
    metrics = ctx.utility.metrics
    parts = []
    baseline = baseline_words(ctx.algorithm)
    if ctx.utility.below_baseline:
        parts.append("POOR: below a trivial baseline (red box above).")
    elif baseline:
        parts.append(f"Not below the trivial baseline the evaluation computes ({baseline}).")
    else:
        parts.append("The evaluation computes no trivial baseline for this algorithm; judge "
                     "the figures below and in section 5.")
    if not ctx.utility.below_baseline and (useless := no_better_than_nothing(metrics)):
        parts.append("Caution: " + ", ".join(
            f"{name} = {format_number(metrics[name])}" for name in useless)
            + " — at or above 1, those queries are answered no better than by publishing "
              "nothing.")
    return " ".join(parts)


def _measure_lines(ctx: CertificateContext) -> list[str]:
    """The key measures, headline first, each with what it means and its scale."""
    metrics = ctx.utility.metrics
    return [describe(ctx.algorithm, name, metrics[name])
            for name in key_measures(ctx.algorithm, metrics, ctx.headline_loss)]


def _provenance(data_use: DataUse) -> str:
    if data_use.comparison_id is None:
        return "Requested directly (algorithm and parameters given by the requester)."
    row = "" if data_use.comparison_row is None else f", row {data_use.comparison_row}"
    return (f"Chosen from comparison {data_use.comparison_id}{row}; the data was checked to "
            "be the data that comparison was run on.")


def summary(ctx: CertificateContext) -> Summary:
    """The first page's facts in words (also what a dashboard can show for a run)."""
    released = [_released_line(f, ctx.released_columns.get(f.name, [])) for f in ctx.released]
    records = ctx.outcome.records if ctx.outcome else None
    n = len(ctx.verification.requirements)
    failed = len(ctx.verification.failures)
    checked = "re-checked on the released bytes by code independent of the anonymizer"
    limits = verification_limits(ctx.algorithm)
    verification = Verdict(ctx.verification.holds, (
        f"all {n} requirement{'s' if n != 1 else ''} hold, {checked}." if
        ctx.verification.holds else f"{failed} of {n} requirements do not hold, {checked}.")
        + (f" {limits}" if limits else ""))
    below = list(ctx.utility.below_baseline)
    waivers = list(ctx.outcome.waivers) if ctx.outcome else []
    others = [w for w in waivers if not any(w.startswith(r) for r in below)]
    return Summary(
        released=released,
        records=records_words(ctx.algorithm, records),
        guarantee=guarantee_sentence(ctx.algorithm, ctx.privacy_model, ctx.parameters),
        verification=verification, attack=_attack_verdict(ctx.outcome, limits is not None),
        utility=_utility_words(ctx), below_baseline=below, measures=_measure_lines(ctx),
        low_utility_waived=len(others) < len(waivers), waivers=others,
        provenance=_provenance(ctx.data_use))


def source_columns(ctx: CertificateContext) -> list[tuple[str, str, str]]:
    """(column, type in words, whether it is in the release) for the source's columns.

    A column found by name in a released file is released (generalized as the algorithm
    does); a tabular release lists every column it has, so a column not among them is not
    released; the diagnosis codes of a document release are in the algorithm's own
    structure (page 1 says which).
    """
    where: dict[str, list[str]] = {}
    for file, columns in ctx.released_columns.items():
        for column in columns:
            where.setdefault(column, []).append(file)
    tabular = any(f.name.endswith((".csv", ".parquet")) for f in ctx.released)
    out = []
    for name, kind in ctx.dataset_schema.items():
        if name == CODE_MAPPING:  # not a column: the code mapping's losses
            continue
        if name in where:
            released = "yes, in " + ", ".join(where[name])
        elif name == CODES_COLUMN and not tabular and ctx.released:
            released = "yes, in the release's own structure (page 1)"
        else:
            released = "no"
        out.append((name, human_type(kind), released))
    return out


# --------------------------------------------------------------------------- rendering
def metrics_chart(utility: UtilityReport) -> Chart | None:
    """A bar chart of the utility figures, for algorithms that draw no chart of their own.

    Every certificate shows at least one picture of utility; values of very different size
    share a log axis so none of them is flattened to nothing.
    """
    values = {k: v for k, v in utility.metrics.items() if v == v and v is not None}
    if not values:
        return None
    from ehr_release.utility.plotting import plt, png

    names = list(values)[::-1]
    figures = [values[n] for n in names]
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(names) + 1.0))
    ax.barh(names, figures, color="#4a78a8")
    positive = [abs(v) for v in figures if v]
    if positive and min(v >= 0 for v in figures) and max(positive) / min(positive) > 1e3:
        ax.set_xscale("log")
    ax.set_xlabel("value")
    fig.tight_layout()
    image = png(fig)
    return Chart("utility-figures", f"Utility figures reported for {utility.algorithm}",
                 image)


def _template_vars(ctx: CertificateContext) -> dict[str, Any]:
    charts = list(ctx.utility.charts)
    if not charts and (fallback := metrics_chart(ctx.utility)) is not None:
        charts.append(fallback)
    tables = [part for name, rows in ctx.utility.tables.items() if rows
              for part in fit_table(name, rows, ctx.algorithm)]
    metrics = [(name, shown_value(ctx.algorithm, name, value), explain(ctx.algorithm, name))
               for name, value in ctx.utility.metrics.items()]
    keys = key_measures(ctx.algorithm, ctx.utility.metrics, ctx.headline_loss)
    key_rows = [row for row in metrics if row[0] in keys]
    return {"c": ctx, "s": summary(ctx), "tables": tables, "metrics": metrics,
            "key_metrics": key_rows, "charts": charts, "max_rows": MAX_TABLE_ROWS,
            "columns": source_columns(ctx), "short": short, "css": stylesheet()}


def render_certificate_html(ctx: CertificateContext) -> str:
    """The certificate as a self-contained HTML page (also what the PDF is made from)."""
    return environment().get_template("certificate.html.j2").render(**_template_vars(ctx))


def render_certificate_pdf(ctx: CertificateContext) -> bytes:
    """Render the certificate to PDF bytes with WeasyPrint."""
    return html_to_pdf(render_certificate_html(ctx))
