"""The datasheet: the one document that leaves with the data, for the recipient.

Everything on it is either data-independent (the guarantee, the parameters, the declared
format, the terms) or readable from the released bytes themselves (file hashes and sizes, the
number of released records). Nothing computed on the original data appears — no measured
support, no candidate-set size, no utility figure — because such figures are outside the
privacy model (for differential privacy, anything computed on the true data and published
spends budget nobody accounted for). Those stay on the internal certificate
(:mod:`ehr_release.documents.certificate`).

It is written for the researcher: section 1, "Load it", prints the code that turns the
files into one record per row (:mod:`ehr_release.reading`, tested by running the printed
code on real releases); a field table lists fields that share one review once, together
(DiffGen's predictors); parameter meanings are cut to what a user of the data needs (the
paper's step numbers and deviations stay on the certificate).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import Any

from ehr_release.core.files import sha256_bytes
from ehr_release.documents.formats_doc import FieldRow, field_rows, how_to_load
from ehr_release.documents.plain import guarantee_sentence, records_words
from ehr_release.documents.rendering import environment, html_to_pdf, stylesheet
from ehr_release.planning.request import DataUse
from ehr_release.privacy.closed_world import ReleaseSchema
from ehr_release.reading import snippet
from ehr_release.version import software_version

DATASHEET = "datasheet.pdf"


@dataclass(frozen=True)
class DatasheetFile:
    """One released file as the recipient sees it: hash, size, format, fields, how to load."""

    name: str
    sha256: str
    size: int
    doc: str
    load: str
    fields: list[FieldRow]


@dataclass(frozen=True)
class DatasheetContext:
    """What a datasheet shows; every field is public by construction (see module doc)."""

    run_id: str
    algorithm: str
    privacy_model: str
    parameters: dict[str, Any]
    files: list[DatasheetFile]
    records: int | None
    checks_passed: list[str]
    attacker_model: str | None
    data_use: DataUse
    approved_at: datetime | None
    audit_head: str
    software_version: str = field(default_factory=software_version)
    parameter_help: dict[str, str] = field(default_factory=dict)
    #: The run's noise or shuffles were seeded (test mode): ``parameters`` leave the seed
    #: out, but the guarantee must still say what a seed does to it.
    seeded: bool = False
    # : The passed attack audit in words (:func:`~ehr_release.documents.plain.attack_statement`);
    # None
    #: falls back to the candidate-set sentence when ``attacker_model`` is set.
    attack_statement: str | None = None
    #: What the checks cannot establish from the bytes (:func:`plain.verification_limits`).
    verification_limits: str | None = None
    #: The history check's words: earlier releases of these patients, a weaker release's
    #: site reason (:mod:`ehr_release.history.checks`); run ids and parameters only.
    history: str | None = None
    #: Under ε-DP: the most ε any patient of this release carries with it, all releases
    #: that held them counted (:mod:`ehr_release.storage.budget`).
    cumulative_epsilon: str | None = None
    #: Made on a test site (:mod:`ehr_release.storage.site`): page 1 says so.
    test_site: bool = False
    #: The source's diagnosis code system and edition (:func:`plain.code_edition`).
    code_system: str | None = None
    #: The GEM mapping rule when the source's ICD-9-CM codes were mapped (no counts:
    #: :func:`plain.code_mapping_words`).
    code_mapping: str | None = None

    @property
    def is_draft(self) -> bool:
        return self.approved_at is None

    @property
    def guarantee(self) -> str:
        """The guarantee in one plain sentence, with this release's parameters."""
        shown = {**self.parameters, "seed": "withheld"} if self.seeded else self.parameters
        return guarantee_sentence(self.algorithm, self.privacy_model, shown)

    @property
    def records_text(self) -> str:
        """The records the files hold, in words (noisy under ε-DP: :func:`records_words`)."""
        if self.records is None:
            return "the records described in section 4"
        return records_words(self.algorithm, self.records)

    @property
    def file_names(self) -> str:
        return ", ".join(f.name for f in self.files)

    @property
    def load_snippet(self) -> str | None:
        """The "Load it" code: one record per row from these files (None: unknown format)."""
        return snippet({f.name for f in self.files})


@dataclass(frozen=True)
class FieldGroup:
    """Fields of one file that share one review, listed once: ``paths`` in file order."""

    paths: list[str]
    kinds: str
    review: str


def field_groups(rows: Sequence[FieldRow]) -> list[FieldGroup]:
    """The field table with each review printed once: fields whose review is the same text
    (the predictors of a DiffGen release, the parameters of its ``cut.json``) share a row,
    placed where the first of them stands."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for r in rows:
        paths, kinds = groups.setdefault(r.review or f"\0{r.path}", ([], []))
        paths.append(r.path)
        if r.kind not in kinds:
            kinds.append(r.kind)
    return [FieldGroup(paths, " or ".join(kinds), "" if review.startswith("\0") else review)
            for review, (paths, kinds) in groups.items()]


#: Parenthetical references to the papers, which a user of the data does not need.
_PAPER_NOTE = re.compile(r"\s*\((?:[^()]|\([^()]*\))*?(?:paper|Step|Algorithm|§|Def\.|"
                         r"Fig\.|footnote|issue|Requirement|et al\.)(?:[^()]|\([^()]*\))*\)")
_STEPS = re.compile(r"\b[Ss]teps? \d+(?:[–-]\d+)?(?: of Algorithm \d+)?\s*")
#: Longest parameter meaning printed on the datasheet (characters).
MAX_HELP = 140


def researcher_help(text: str) -> str:
    """A parameter's declared meaning cut to what the recipient needs: no paper references
    or step numbers, the first clause when it is long, at most :data:`MAX_HELP` characters."""
    text = _STEPS.sub("", _PAPER_NOTE.sub("", text)).strip()
    if len(text) > MAX_HELP:
        text = re.split(r"(?<=\S)[:;] ", text, maxsplit=1)[0]
        if text.count("(") > text.count(")"):  # the cut fell inside a parenthesis
            text = text[:text.rfind("(")].rstrip()
    if len(text) > MAX_HELP:
        text = text[:MAX_HELP].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"
    return text


def describe_files(files: Mapping[str, bytes], schema: ReleaseSchema | None,
                   digests: Mapping[str, tuple[str, int]] | None = None
                   ) -> list[DatasheetFile]:
    """Each released file with its declared format (the verifier enforced exactly this).

    A table whose columns the run's configuration names shows the columns this release
    actually has (the verifier derived and checked the same list). ``digests`` (name →
    SHA-256, size) are hashes already taken of exactly these files — the run's pinned
    candidate — so a large release is not hashed again for each document.
    """
    declared = {f.name: f for f in (schema.files if schema else ())}
    out = []
    for name, data in sorted(files.items()):
        digest, size = digests[name] if digests else (sha256_bytes(data), len(data))
        spec = declared.get(name)
        if spec is not None and spec.columns_from is not None:
            # A verified release derives them; otherwise the generic row stays.
            with suppress(Exception):
                spec = spec.for_release(files)
        out.append(DatasheetFile(
            name=name, sha256=digest, size=size, doc=spec.doc if spec else "",
            load=how_to_load(spec) if spec else "", fields=field_rows(spec) if spec else []))
    return out


def public_parameters(params: dict[str, Any], site_paths: Collection[str] = ()
                      ) -> dict[str, Any]:
    """Parameters as published: without a test seed (it would let anyone replay the noise or
    shuffles), and with each of ``site_paths`` (a configuration, a population file) cut to
    its file name — the folders it sits in are the site's, not the release's, and can say
    more than the recipient needs (a cohort's folder name, a user's home)."""
    return {k: (PurePath(v).name if k in site_paths and isinstance(v, str) else v)
            for k, v in params.items() if k != "seed"}


def render_datasheet_html(ctx: DatasheetContext) -> str:
    """The datasheet as a self-contained HTML page (also what the PDF is made from)."""
    return environment().get_template("datasheet.html.j2").render(
        c=ctx, css=stylesheet(), field_groups=field_groups, brief=researcher_help)


def render_datasheet_pdf(ctx: DatasheetContext) -> bytes:
    """Render the datasheet to PDF bytes with WeasyPrint."""
    return html_to_pdf(render_datasheet_html(ctx))
