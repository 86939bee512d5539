"""What a data steward asks for: one release request, validated before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from ehr_release.flows.runners import RUNNER_PATTERN

DEFAULT_APPROVAL_TIMEOUT_S = 7 * 24 * 3600


@dataclass(frozen=True)
class DataUse:
    """To whom a release goes and on what terms (free text from the steward; may be unset)."""

    recipient: str | None = None
    purpose: str | None = None
    terms: str | None = None


class ReleaseRequest(BaseModel):
    """Inputs of one release run; travels as the flow's single parameter.

    Paths are kept as strings so the request serializes cleanly into Prefect's parameters
    and the audit log. Algorithm parameters stay raw (strings from the CLI) and are parsed
    by the algorithm's declared :class:`~ehr_release.params.Param` list.
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
    approval_timeout_s: int = Field(default=DEFAULT_APPROVAL_TIMEOUT_S, gt=0)
    # Set when the request comes from a comparison row: the data must be what was compared.
    expected_fingerprint: str | None = None
    # Prefect task runner (see flows/runners.py): threads, dask[:N] or tcp://scheduler.
    task_runner: str = Field(default="threads", pattern=RUNNER_PATTERN)
    # A release that holds no records, or whose utility is below a trivial baseline the
    # evaluation computed, is refused unless the request says so explicitly; the certificate
    # then names the waiver.
    allow_empty: bool = False
    allow_low_utility: bool = False
    # Who receives the data and on what terms: printed on the certificate and the datasheet.
    recipient: str | None = Field(default=None, max_length=500)
    purpose: str | None = Field(default=None, max_length=2000)
    terms: str | None = Field(default=None, max_length=4000)

    @field_validator("requester")
    @classmethod
    def _strip(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("requester must not be blank")
        return v.strip()

    @property
    def data_use(self) -> DataUse:
        """The request's recipient, purpose and terms, as the certificates print them."""
        return DataUse(recipient=self.recipient, purpose=self.purpose, terms=self.terms)

    @property
    def releases_dir(self) -> Path:
        """Where approved releases appear: ``<out_dir>/releases/<run_id>/``."""
        return Path(self.out_dir) / "releases"


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

    @property
    def folder(self) -> Path:
        """Where the report lands: ``<out_dir>/comparisons/<comparison_id>/``."""
        return Path(self.out_dir) / "comparisons" / self.comparison_id
