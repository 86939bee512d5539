"""The comparisons pages, and "release this row": a steward's normal, governed request.

Releasing a row is exactly ``ehr-release run --from-comparison DIR --row N``: the row is
read by the same function (:func:`ehr_release.comparison.comparison_file.load_comparison_row`, which
refuses unverified and ε-DP rows), the input must have the comparison's fingerprint, the
site's data-use policy and the destination are checked, the request is prechecked and its
run registered (every refusal is an ``ingest.rejected`` event), and the flow then verifies,
audits and parks the release for a reviewer other than the steward. Nothing is published
from this page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ehr_release.core.errors import EhrReleaseError
from ehr_release.dashboard import comparisons
from ehr_release.dashboard.pages import render
from ehr_release.dashboard.security import Who, csrf_guard
from ehr_release.dashboard.settings import settings_of
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.users import SignedIn

router = APIRouter()
#: Comparisons are internal documents: utilities measured on the original data.
READERS = frozenset({"steward", "reviewer"})


def _reader(who: SignedIn) -> None:
    if who.role not in READERS:
        raise HTTPException(status_code=403, detail="only stewards and reviewers read "
                            "comparisons")


def _view_or_404(comparison_id: str) -> comparisons.ComparisonView:
    folder = comparisons.find(comparison_id)
    if folder is None:
        raise HTTPException(status_code=404, detail="no such comparison")
    try:
        return comparisons.load(folder)
    except (OSError, ValueError):
        raise HTTPException(status_code=500, detail="the comparison report cannot be read"
                            ) from None


@router.get("/comparisons", response_class=HTMLResponse)
def comparison_list(request: Request, who: Who) -> HTMLResponse:
    _reader(who)
    views = []
    for folder in comparisons.comparison_folders():
        try:
            views.append(comparisons.load(folder))
        except (OSError, ValueError):
            continue
    return render(request, "comparisons.html.j2", who, views=views)


def comparison_page(request: Request, who: SignedIn, comparison_id: str, *,
                    status_code: int = 200, error: str | None = None,
                    form: dict[str, str] | None = None) -> HTMLResponse:
    view = _view_or_404(comparison_id)
    return render(request, "comparison.html.j2", who, status_code, view=view, error=error,
                  form=form or {}, can_request=who.role == "steward",
                  withheld=comparisons.WITHHELD)


@router.get("/comparisons/{comparison_id}", response_class=HTMLResponse)
def comparison(request: Request, comparison_id: str, who: Who,
               row: int | None = None) -> HTMLResponse:
    """The report; ``row`` (a "release this row" link) is the one the form offers first."""
    _reader(who)
    return comparison_page(request, who, comparison_id,
                           form={"row": str(row)} if row is not None else None)


@router.post("/comparisons/{comparison_id}/release", dependencies=[Depends(csrf_guard)])
def release_row(request: Request, comparison_id: str, who: Who,
                row: Annotated[int, Form()], input_path: Annotated[str, Form()],
                diagnoses: Annotated[str, Form()] = "", admissions: Annotated[str, Form()] = "",
                recipient: Annotated[str, Form()] = "", purpose: Annotated[str, Form()] = "",
                terms: Annotated[str, Form()] = "", expires: Annotated[str, Form()] = ""
                ) -> Response:
    """Request a release of one row (see the module docstring); on success the browser goes
    to the new run's page, which follows the flow."""
    from ehr_release import service
    from ehr_release.comparison.comparison_file import load_comparison_row
    from ehr_release.planning.request import check_data_use_policy
    from ehr_release.storage import runs

    if who.role != "steward":
        record_event(actor=who.name, action=AuditAction.INGEST_REJECTED,
                     payload={"comparison": comparison_id, "row": row,
                              "error": f"role {who.role} may not request releases"})
        raise HTTPException(status_code=403, detail=f"a {who.role} may not request releases")
    view = _view_or_404(comparison_id)
    form = {"row": str(row), "input_path": input_path, "diagnoses": diagnoses,
            "admissions": admissions, "recipient": recipient, "purpose": purpose,
            "terms": terms, "expires": expires}
    run_id = runs.new_run_id()
    try:
        if not input_path.strip():
            raise EhrReleaseError("give the patients file (the comparison's input)")
        algorithm, params, fingerprint = load_comparison_row(str(view.folder), row)
        request_ = service.request_from_cli(
            input_path=Path(input_path.strip()),
            diagnoses=Path(diagnoses.strip()) if diagnoses.strip() else None,
            admissions=Path(admissions.strip()) if admissions.strip() else None,
            class_column=None, algorithm=algorithm, params=params, requester=who.name,
            out_dir=view.destination, approval_timeout_s=None,
            expected_fingerprint=fingerprint, recipient=recipient.strip() or None,
            purpose=purpose.strip() or None, terms=terms.strip() or None,
            expires=expires.strip() or None).with_comparison(view.folder, row)
        run_id = request_.run_id
        check_data_use_policy(request_)
    except (EhrReleaseError, ValueError) as exc:
        message = str(exc) if isinstance(exc, EhrReleaseError) else "malformed request"
        service.record_refusal(who.name, run_id, input_path.strip(),
                               exc if isinstance(exc, EhrReleaseError)
                               else EhrReleaseError(message))
        return comparison_page(request, who, comparison_id, status_code=400,
                               error=f"Refused: {message}", form=form)
    try:
        service.precheck(request_, register=True)  # audits its own refusal
    except EhrReleaseError as exc:
        return comparison_page(request, who, comparison_id, status_code=400,
                               error=f"Refused: {exc}", form=form)
    settings_of(request).launch(request_)
    return RedirectResponse(f"/runs/{request_.run_id}", status_code=303)
