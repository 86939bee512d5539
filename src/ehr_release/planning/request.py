"""What a data steward asks for: one release request, validated before anything runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ehr_release.core.errors import EhrReleaseError, ParameterError

#: Which task runner the flow uses; the spec travels in the request, so a resumed run uses
#: the runner it started with:
#:
#: * ``threads`` or ``threads:N`` — Prefect's thread pool (N workers); enough for one machine;
#: * ``dask`` or ``dask:N`` — a local Dask cluster of N worker processes (default: one per
#:   core) started for the flow and closed after it;
#: * ``tcp://host:8786`` (or ``tls://``) — an existing ``distributed`` scheduler. Patient data
#:   travels to its workers: use only a cluster inside the data's trust boundary, with TLS.
RUNNER_PATTERN = r"^(threads|dask)(:[1-9][0-9]{0,2})?$|^(tcp|tls)://[A-Za-z0-9.\-\[\]:]+$"
_RUNNER_SPEC = re.compile(RUNNER_PATTERN)


def check_runner_spec(spec: str) -> str:
    """``spec`` if it follows :data:`RUNNER_PATTERN`, else a :class:`ParameterError`."""
    if not _RUNNER_SPEC.match(spec):
        raise ParameterError("task_runner", "must be threads[:N], dask[:N] or "
                             "tcp://HOST:PORT of a Dask scheduler", spec)
    return spec


#: Site policy: when set to 1, a release request must name its recipient, purpose, data-use
#: terms and expiry (a privacy office that files every release against a data-use agreement).
REQUIRE_DATA_USE_ENV = "EHR_RELEASE_REQUIRE_DATA_USE"
#: The request fields the policy requires, with the CLI option that sets each.
DATA_USE_OPTIONS = {"recipient": "--recipient", "purpose": "--purpose", "terms": "--terms",
                    "expires": "--expires"}


@dataclass(frozen=True)
class DataUse:
    """What the request says about the release beyond algorithm and parameters.

    To whom it goes, for what, on what terms and until when (``expires``: the ISO date by
    which the recipient must delete the data) — free text from the steward, each may be
    unset unless the site policy requires it — and, for a run started from a comparison
    row, which comparison and row chose it. It travels unchanged from the request to the
    parked bundle, so the final certificate states what the request said, days later.
    """

    recipient: str | None = None
    purpose: str | None = None
    terms: str | None = None
    expires: str | None = None
    comparison_id: str | None = None
    comparison_row: int | None = None


def require_data_use() -> bool:
    """Whether the site requires data-use terms: its stored setting, initialised from
    ``EHR_RELEASE_REQUIRE_DATA_USE`` on first use (:mod:`ehr_release.storage.site_settings`),
    so the request and the flow's own check at ingest agree whichever process runs them."""
    from ehr_release.storage.site_settings import setting

    return setting("require_data_use").value == "on"


def check_mapping(code_system: str | None, code_mapping: str | None) -> None:
    """The GEM mapping yields ICD-10-CM: an extract declared ICD-9-CM cannot ask for it."""
    if code_mapping is not None and code_system == "icd9":
        raise ValueError("code_mapping gem maps ICD-9-CM codes to ICD-10-CM: declare "
                         "code_system icd10, or none")


class ReleaseRequest(BaseModel):
    """Inputs of one release run; travels as the flow's single parameter.

    Paths are kept as strings so the request serializes cleanly into Prefect's parameters
    and the audit log. Algorithm parameters stay raw (strings from the CLI) and are parsed
    by the algorithm's declared :class:`~ehr_release.parameters.params.Param` list.
    """

    run_id: str = Field(pattern=r"^rel-[0-9a-f]{32}$")
    input_path: str
    diagnoses_path: str | None = None
    admissions_path: str | None = None
    class_column: str | None = None
    algorithm: str
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    requester: str = Field(min_length=1)
    out_dir: str
    # None: the site's approval window when the run is parked (`ehr-release policy
    # approval-window`, DEFAULT_APPROVAL_TIMEOUT_S unless changed).
    approval_timeout_s: int | None = Field(default=None, gt=0)
    # Set when the request comes from a comparison row: the data must be what was compared.
    expected_fingerprint: str | None = None
    # Prefect task runner (see flows/runners.py): threads, dask[:N] or tcp://scheduler.
    task_runner: str = Field(default="threads", pattern=RUNNER_PATTERN)
    # A release that holds no records, or whose utility is below a trivial baseline the
    # evaluation computed, is refused unless the request says so explicitly; the certificate
    # then names the waiver.
    allow_empty: bool = False
    allow_low_utility: bool = False
    # The extract's diagnosis code system (icd9 | icd10); None: detected from the codes.
    code_system: Literal["icd9", "icd10"] | None = None
    # ``gem``: map ICD-9-CM codes to ICD-10-CM with the CMS GEMs (ehr_release.ingest.gem)
    # instead of refusing an extract that mixes them; the certificate reports the losses.
    code_mapping: Literal["gem"] | None = None
    # Who receives the data and on what terms: printed on the certificate and the datasheet.
    recipient: str | None = Field(default=None, max_length=500)
    purpose: str | None = Field(default=None, max_length=2000)
    terms: str | None = Field(default=None, max_length=4000)
    # When the recipient must delete the data: an ISO date (YYYY-MM-DD).
    expires: str | None = Field(default=None, max_length=10)
    # Provenance of a request made from a comparison row (see with_comparison).
    comparison_id: str | None = Field(default=None, max_length=200)
    comparison_row: int | None = Field(default=None, ge=0)
    # The population the extract is drawn from (registered at the site; ``default`` always
    # is): releases of one source are judged together (ehr_release.history).
    source: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")

    @model_validator(mode="after")
    def _mapping_target(self) -> ReleaseRequest:
        check_mapping(self.code_system, self.code_mapping)
        return self

    @field_validator("requester")
    @classmethod
    def _strip(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("requester must not be blank")
        return v.strip()

    @field_validator("recipient", "purpose", "terms", "expires")
    @classmethod
    def _blank_is_unset(cls, v: str | None) -> str | None:
        """A blank answer is no answer: the policy must not be met by ``--terms ' '``."""
        return v.strip() or None if v is not None else None

    @field_validator("expires")
    @classmethod
    def _iso_date(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            return date.fromisoformat(v).isoformat()
        except ValueError:
            raise ValueError(f"expires must be an ISO date YYYY-MM-DD (got {v!r})") from None

    @property
    def data_use(self) -> DataUse:
        """Recipient, purpose, terms, expiry and provenance, as the certificates print them."""
        return DataUse(recipient=self.recipient, purpose=self.purpose, terms=self.terms,
                       expires=self.expires, comparison_id=self.comparison_id,
                       comparison_row=self.comparison_row)

    def with_comparison(self, folder: str | Path | None, row: int | None) -> ReleaseRequest:
        """This request, marked as chosen from ``row`` of the comparison in ``folder``.

        The comparison's id is its folder's name (``<out>/comparisons/<id>/``); without a
        folder the request is returned unchanged, so the CLI can call it unconditionally.
        """
        if folder is None:
            return self
        comparison = Path(folder).resolve().name
        return ReleaseRequest.model_validate(
            {**self.model_dump(), "comparison_id": comparison, "comparison_row": row})


def check_data_use_policy(request: ReleaseRequest, today: date | None = None) -> None:
    """Refuse a request the site's data-use policy does not allow, in one message.

    With the site's data-use policy on (``ehr-release policy data-use on``) the recipient,
    purpose, terms and expiry are required (the privacy office files each release against a
    data-use agreement). Whatever the policy, an expiry already past is refused: the
    recipient would have to delete the data before receiving it. Checked when a run is
    created, never when it is resumed.

    Raises
    ------
    EhrReleaseError
        Naming every missing option, or the past expiry.
    """
    if require_data_use():
        missing = [option for name, option in DATA_USE_OPTIONS.items()
                   if getattr(request, name) is None]
        if missing:
            raise EhrReleaseError(
                "site policy (`ehr-release policy data-use on`) requires the recipient, purpose, "
                f"data-use terms and expiry of every release; missing: {', '.join(missing)}")
    if request.expires is not None:
        day = today or date.today()
        if date.fromisoformat(request.expires) <= day:
            raise EhrReleaseError(f"--expires {request.expires} is not after today "
                                  f"({day.isoformat()}): give the date by which the "
                                  "recipient must delete the data")


class ComparisonRequest(BaseModel):
    """Inputs of one comparison: algorithms × a parameter grid on one dataset."""

    comparison_id: str = Field(pattern=r"^cmp-[0-9a-f]{32}$")
    input_path: str
    diagnoses_path: str | None = None
    admissions_path: str | None = None
    class_column: str | None = None
    algorithms: list[str] = Field(min_length=1)
    params: dict[str, str] = Field(default_factory=dict)
    grid: dict[str, list[str]] = Field(default_factory=dict)
    requirements: list[str] = Field(default_factory=list)
    max_loss: float | None = None
    metric: str | None = None
    requester: str = Field(min_length=1)
    out_dir: str
    task_runner: str = Field(default="threads", pattern=RUNNER_PATTERN)
    # The registered population the extract is drawn from (see ReleaseRequest.source).
    source: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")
    # The extract's diagnosis code system (icd9 | icd10); None: detected from the codes.
    code_system: Literal["icd9", "icd10"] | None = None
    # ``gem``: map ICD-9-CM codes to ICD-10-CM with the CMS GEMs (ehr_release.ingest.gem)
    # instead of refusing an extract that mixes them; the certificate reports the losses.
    code_mapping: Literal["gem"] | None = None

    @model_validator(mode="after")
    def _mapping_target(self) -> ComparisonRequest:
        check_mapping(self.code_system, self.code_mapping)
        return self

    @property
    def folder(self) -> Path:
        """Where the report lands: ``<out_dir>/comparisons/<comparison_id>/``."""
        return Path(self.out_dir) / "comparisons" / self.comparison_id
