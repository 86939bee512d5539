"""The population fingerprint a GCCens release publishes commits to the model's public part
of the population only.

``censoring.json`` carries ``population.fingerprint`` so a verifier can check the release
against the same population. k-map's adversary holds the population's code multisets; a
hash over the whole extract also committed to what they do not hold — medical record
numbers, ages, sex, in-hospital death — of every population member, sample included (the
example maps the sample against itself). An unsalted hash of that is a confirmation oracle:
whoever knows all but one value tries each candidate.
"""

from __future__ import annotations

from pathlib import Path

from ehr_release.ingest.population import load_population

HEADER = "patient_id,age,gender,ethnicity,marital_status,insurance,in_hospital_death,codes\n"


def _write(path: Path, rows: list[str]) -> str:
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return str(path)


def test_fingerprint_depends_on_the_code_multisets_only(tmp_path: Path) -> None:
    codes = ["401.9;428.0", "401.9", "250.00;401.9;401.9", "428.0"]
    base = _write(tmp_path / "a.csv", [
        f"P{i},{50 + i},F,WHITE,SINGLE,Medicare,0,{c}" for i, c in enumerate(codes)])
    # Same code multisets; other ids, ages, sex and one patient's in-hospital death.
    other = _write(tmp_path / "b.csv", [
        f"M{i},{70 - i},M,WHITE,MARRIED,Private,{int(i == 2)},{c}"
        for i, c in enumerate(codes)])
    changed = _write(tmp_path / "c.csv", [
        f"P{i},{50 + i},F,WHITE,SINGLE,Medicare,0,{c}"
        for i, c in enumerate([*codes[:3], "428.0;584.9"])])
    a, b, c = (load_population(p).info for p in (base, other, changed))
    assert a["records"] == b["records"] == 4
    assert a["fingerprint"] == b["fingerprint"]
    assert a["fingerprint"] != c["fingerprint"]
