"""ArtUC on the MIMIC-III demo through the whole governed flow, with the examples/ config:
anonymize → verify → evaluate → certify → approve → publish (slow: starts Prefect).

GenDiag runs on worker processes here although the demo is small (the threshold is
lowered): spawning them from inside a Prefect flow is the path big inputs take.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from tests.conftest import SHARED_DATA
from tests.flow_helpers import decide, start, wait_status
from tests.kkm_release import read_records
from tests.test_artuc_registry import EXAMPLE

pytestmark = pytest.mark.slow


def test_artuc_mimic_example_is_published(harness, ehr_home, tmp_path, monkeypatch) -> None:
    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.runtime import workers

    spawned = []
    real = workers.gendiag_threads

    def counted(*args, **kwargs):
        spawned.append(args[1:])
        return real(*args, **kwargs)

    monkeypatch.setattr(workers, "usable_cpus", lambda: 2)
    monkeypatch.setattr(workers, "gendiag_threads", counted)

    if not (SHARED_DATA / "mimic3-demo").exists():
        pytest.skip("MIMIC-III demo not found")
    out = tmp_path / "out"
    req = ReleaseRequest(
        run_id=runs.new_run_id(), input_path=str(SHARED_DATA / "mimic3-demo"),
        algorithm="artuc", requester="steward", out_dir=str(out), approval_timeout_s=300,
        params={"k": "5", "delta": "0.4", "config": str(EXAMPLE / "config.yaml")})
    thread, box = start(req)
    status = wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}, timeout=300)
    assert status == Status.AWAITING_APPROVAL, runs.get_run(req.run_id).error
    verification = runs.latest_verification(req.run_id)
    assert verification["holds"]
    assert {"(k, k^m)-anonymity", "truthfulness", "utility constraints (Def. 9)"} <= {
        r["name"] for r in verification["requirements"]}
    decide(req.run_id, "approve")
    thread.join(180)
    assert box.get("result") == "published", box
    folder = out / "releases" / req.run_id
    assert {p.name for p in folder.iterdir()} == {"records.parquet", "generalized_codes.parquet",
                                                  "datasheet.pdf", "manifest.json"}
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix == ".parquet"}
    lines = read_records(files)  # issue 14: no per-record count
    assert lines and all(set(x) == {"cluster", "demographics", "codes"} for x in lines)
    assert list(pd.read_parquet(folder / "records.parquet").columns) == [
        "cluster", *lines[0]["demographics"], "generalized_codes"]
    assert not any(pid in json.dumps(lines) for pid in ("10006", "10011"))
    # anonymize, then Baseline for the comparison, on GenDiag threads (m = 2 is compiled);
    # the comparator RmR (Poulis et al., issue 19) generalizes codes along the hierarchy
    assert len(spawned) == 2
