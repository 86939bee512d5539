"""Every field of a DiffGen ledger is pinned by the verifier's replay: no free text.

The ledger's texts and bookkeeping numbers (``touched``, parallel ``group`` names, events,
``index``, ``epsilon_float``, an emptiness test's public threshold and number of child
combinations) are functions of the parameters, the public taxonomies and the DP choices the
replay walks. Left unchecked, each would publish whatever the writer put there — a true
count, say — in a release whose guarantee covers only the mechanisms' outputs; the datasheet
calls ``touched`` "fixed text ... no record count".
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ehr_release.privacy import diffgen as verifier
from ehr_release.privacy import diffgen_ledger
from ehr_release.registry.diffgen import ENTRY
from ehr_release.samples.sample import generate_sample
from tests.test_diffgen_counts_check import make_release


@pytest.fixture(scope="module")
def release():
    return make_release(n=400, predictors="gender,age,codes", h=5)


def _dump(ledger: dict[str, Any]) -> bytes:
    return (json.dumps(ledger, indent=2, ensure_ascii=False) + "\n").encode()


def _first(ledger: dict[str, Any], phase: str) -> dict[str, Any]:
    return next(c for c in ledger["charges"] if c["phase"] == phase)


def _touched(ledger: dict[str, Any]) -> None:
    _first(ledger, "selection")["touched"] += " (true total 400)"


def _group(ledger: dict[str, Any]) -> None:
    _first(ledger, "final-counts")["group"] = "final counts: 400 true records"


def _event(ledger: dict[str, Any]) -> None:
    ledger["events"].append({"step": 1, "event": "400 records"})


def _index(ledger: dict[str, Any]) -> None:
    ledger["charges"][0]["index"] = 400


def _epsilon_float(ledger: dict[str, Any]) -> None:
    _first(ledger, "selection")["epsilon_float"] += 4e-12


def _threshold(ledger: dict[str, Any]) -> None:
    _first(ledger, "emptiness")["detail"]["threshold"] += 4e-12


def _combinations(ledger: dict[str, Any]) -> None:
    _first(ledger, "emptiness")["detail"]["combinations"] += 1


def _scale(ledger: dict[str, Any]) -> None:
    ledger["charges"][0]["scale"] += 4e-12  # more noise, as the ledger says: no loss above ε


def test_the_honest_ledger_holds(release) -> None:
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    assert any(c["phase"] == "emptiness" for c in ledger["charges"]), "no emptiness test"
    assert verifier.verify(files, data, params).holds


@pytest.mark.parametrize("plant", [_touched, _group, _event, _index, _epsilon_float,
                                   _threshold, _combinations, _scale])
def test_a_ledger_field_off_its_replay_fails(release, plant: Callable) -> None:
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    plant(ledger)
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert not report.holds


def _doubled(fraction: str) -> str:
    """``"1/22"`` → ``"2/44"``: the same number, spelled another way."""
    top, bottom = fraction.split("/")
    return f"{2 * int(top)}/{2 * int(bottom)}"


def _attr(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(a for a in doc["attributes"] if a["kind"] == kind)


HEADER_PLANTS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "configuration": ("cut.json", lambda d: d.__setitem__("configuration", "mimic-demo 400")),
    "epsilon spelled": ("cut.json", lambda d: d["parameters"].__setitem__("epsilon", "1.0")),
    "epsilon_prime spelled": ("cut.json", lambda d: d.__setitem__(
        "epsilon_prime", _doubled(d["epsilon_prime"]))),
    "categorical root": ("cut.json", lambda d: _attr(d, "categorical").__setitem__(
        "taxonomy_root", "R400")),
    "set-valued root": ("cut.json", lambda d: _attr(d, "set-valued").__setitem__(
        "taxonomy_root", "R400")),
    "set-valued taxonomy": ("cut.json", lambda d: _attr(d, "set-valued").__setitem__(
        "taxonomy", {"taxonomy": "icd9-400", "depth": 3, "max_fanout": 4})),
    "set-valued empty": ("cut.json", lambda d: _attr(d, "set-valued").__setitem__(
        "empty", "(400)")),
    "set-valued separator": ("cut.json", lambda d: _attr(d, "set-valued").__setitem__(
        "separator", "|400|")),
    "interval digits": ("cut.json", lambda d: _attr(d, "numerical")["intervals"][0].__setitem__(
        0, _attr(d, "numerical")["intervals"][0][0] + 4e-12)),
    "neighbouring": ("ledger.json", lambda d: d.__setitem__("neighbouring", "400 records")),
    "numerical_predictors": ("ledger.json", lambda d: d.__setitem__("numerical_predictors",
                                                                     400)),
    "total_budget": ("ledger.json", lambda d: d.__setitem__("total_budget", "400")),
    "charge epsilon spelled": ("ledger.json", lambda d: d["charges"][0].__setitem__(
        "epsilon", _doubled(d["charges"][0]["epsilon"]))),
}


@pytest.mark.parametrize("plant", sorted(HEADER_PLANTS))
def test_a_public_description_off_the_configuration_fails(release, plant: str) -> None:
    """cut.json and the ledger's header restate the parameters and the public configuration:
    each field must be exactly that, in its one spelling (``1/22``, not ``2/44``)."""
    files, data, params = release
    name, change = HEADER_PLANTS[plant]
    doc = json.loads(files[name])
    change(doc)
    report = verifier.verify({**files, name: _dump(doc)}, data, params)
    assert not report.holds


#: Detail fields the release does not determine: each is a function of noisy emptiness
#: decisions about partitions that a later test drops entirely (no released group descends
#: from them), so the verifier cannot recompute it and it would carry whatever its writer put
#: there. The ledger publishes none of them; a ledger that does fails.
UNDERIVABLE = [("selection", "candidates"), ("emptiness", "partitions"),
               ("emptiness", "kept")]


@pytest.mark.parametrize(("phase", "field"), UNDERIVABLE)
def test_an_underivable_detail_field_is_not_published(release, phase: str, field: str) -> None:
    files, _, _ = release
    ledger = json.loads(files["ledger.json"])
    assert all(field not in c["detail"] for c in ledger["charges"] if c["phase"] == phase)


@pytest.mark.parametrize(("phase", "field"), UNDERIVABLE)
@pytest.mark.parametrize("value", [0, 1, 7])
def test_a_ledger_carrying_an_underivable_field_fails(release, phase: str, field: str,
                                                      value: int) -> None:
    """Before this check, ``candidates``, ``partitions`` or ``kept`` + 1 (or any small
    integer) verified: a few bits per charge, free for a patient's value."""
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    _first(ledger, phase)["detail"][field] = value
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "ledger text fixed" in {r.name for r in report.failures}


@pytest.mark.parametrize("value", [1, 7])
def test_a_partition_count_with_a_touched_text_to_match_fails(release, value: int) -> None:
    """The ledger once published how many partitions an emptiness test covered, in its detail
    and its ``touched`` text; a writer changing both consistently verified."""
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    charge = _first(ledger, "emptiness")
    d = charge["detail"]
    d["partitions"] = value
    charge["touched"] = (f"records of the {value} partitions holding {d['node']}, "
                         f"{d['combinations']} disjoint child combinations each")
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "ledger text fixed" in {r.name for r in report.failures}


@pytest.fixture(scope="module")
def numerical_release():
    """A release whose selections specialize a numerical interval (age) more than once."""
    return make_release(n=200, seed=9, predictors="gender,age,codes", h=8)


def test_a_numerical_selection_restates_its_drawn_point(numerical_release) -> None:
    """A numerical selection repeats the split point its interval drew earlier (already
    paid); the verifier took any number there, so it could carry anything."""
    files, data, params = numerical_release
    ledger = json.loads(files["ledger.json"])
    chosen = [c for c in ledger["charges"]
              if c["phase"] == "selection" and c["detail"]["kind"] == "numerical"]
    assert chosen, "no numerical selection"
    assert verifier.verify(files, data, params).holds
    chosen[0]["detail"]["point"] += 1
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "charges complete and scoped" in {r.name for r in report.failures}


def test_a_selections_children_come_in_name_order(release) -> None:
    """The children of a categorical or set-valued selection are the taxonomy's, in name
    order; the verifier compared them as sets, so their order (log2 k! bits) was free."""
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    chosen = next(c for c in ledger["charges"] if c["phase"] == "selection"
                  and c["detail"]["kind"] != "numerical" and len(c["detail"]["children"]) > 1)
    assert chosen["detail"]["children"] == sorted(chosen["detail"]["children"])
    chosen["detail"]["children"].reverse()
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "charges complete and scoped" in {r.name for r in report.failures}


def _respell(point: int | float) -> float:
    return float(point)


def _fraction(point: int | float) -> float:
    return point + 0.5


@pytest.mark.parametrize("change", [_respell, _fraction])
def test_a_split_point_has_one_spelling_and_is_whole_in_an_integer_domain(
        release, change: Callable) -> None:
    """Age's domain is integer: the mechanism draws whole points, written as JSON integers.
    ``25.0`` for ``25``, or ``25.5``, verified (a drawn but unused point changes nothing
    else), so the spelling and the fraction were free bits."""
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    split = _first(ledger, "initial-split")
    assert type(split["detail"]["point"]) is int
    split["detail"]["point"] = change(split["detail"]["point"])
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "charges complete and scoped" in {r.name for r in report.failures}


def test_an_honest_release_over_a_real_domain_holds() -> None:
    """Over a real domain the drawn points are decimals: the one spelling the verifier
    requires is the one the algorithm writes."""
    data = generate_sample(200, seed=9)
    params = ENTRY.parse({"epsilon": "1", "h": "8", "taxonomies": "mimic-demo",
                          "predictors": "gender,age,codes", "domains": "age=0.0:91.0",
                          "seed": "9", "eval_runs": "0"})
    files = ENTRY.anonymize(data, params, np.random.default_rng(9))
    points = [c["detail"]["point"] for c in json.loads(files["ledger.json"])["charges"]
              if "point" in c["detail"]]
    assert len(points) > 2 and any(type(p) is float for p in points)
    assert verifier.verify(files, data, params).holds


@pytest.mark.parametrize("phase", ["initial-split", "selection", "emptiness", "final-counts"])
def test_a_sensitivity_other_than_the_parameters_fails(release, phase: str) -> None:
    """Δ = 1 for a count, Δu = 1 for the Max score. A larger one with the scale to match
    is still private, so it verified -- which value stood there was the writer's choice."""
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    charge = _first(ledger, phase)
    assert charge["sensitivity"] == "1"
    factor = 2 if charge["mechanism"] == "exponential" else 1
    charge["sensitivity"] = "3"
    charge["scale"] = diffgen_ledger._round_up(factor * 3 / Fraction(charge["epsilon"]))
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "ledger text fixed" in {r.name for r in report.failures}


def test_the_verifier_spells_infogains_sensitivity_as_the_format_does() -> None:
    """With the sensitivity pinned, the verifier's own Δu of InfoGain must be the one the
    format writes for every class count (both configurations have two classes, so a 3-class
    release is only reachable with a custom configuration)."""
    from ehr_release.algorithms.diffgen.noise import class_count_sensitivity

    for n in range(2, 41):
        assert verifier._log2_upper(n) == class_count_sensitivity(n), n


def test_the_noise_label_is_the_one_the_seed_parameter_gives(release) -> None:
    """A seeded (test-mode) run must say so and a production run must not: the label
    follows the ``seed`` parameter, so flipping it (one bit, and a false claim) fails."""
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    assert params.get("seed") is not None
    assert ledger["noise"] == diffgen_ledger.SEEDED_NOISE
    ledger["noise"] = diffgen_ledger.NOISE
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "public description fixed" in {r.name for r in report.failures}
    unseeded = verifier.verify(files, data, {**params, "seed": None})
    assert "public description fixed" in {r.name for r in unseeded.failures}


def _reverse_cut(kind: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        attr = _attr(doc, kind)
        assert len(attr["cut"]) > 1, "a cut of one value cannot be reordered"
        attr["cut"].reverse()
        if kind == "numerical":
            attr["intervals"].reverse()
    return change


CUT_PLANTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "class value added": lambda d: d["class"]["values"].append("400"),
    "class values reordered": lambda d: d["class"]["values"].reverse(),
    "count column renamed": lambda d: d.__setitem__("count_column", "n"),
    "set-valued cut reordered": _reverse_cut("set-valued"),
    "numerical cut reordered": _reverse_cut("numerical"),
}


@pytest.mark.parametrize("plant", sorted(CUT_PLANTS))
def test_cut_json_class_and_cut_order_are_the_configurations(numerical_release,
                                                             plant: str) -> None:
    """cut.json's class entry restates the configuration and each cut is sorted (by name,
    by interval): an extra class value (any text), or a permutation of a cut (log2 n! bits:
    18 for 9 nodes), verified before."""
    files, data, params = numerical_release
    doc = json.loads(files["cut.json"])
    CUT_PLANTS[plant](doc)
    report = verifier.verify({**files, "cut.json": _dump(doc)}, data, params)
    assert "public description fixed" in {r.name for r in report.failures}


def _respelled_cut_set(nodes: list[str]) -> str:
    return ";".join(reversed(nodes))


def _repeated_node(nodes: list[str]) -> str:
    return ";".join([*nodes, nodes[0]])


@pytest.mark.parametrize("respell", [_respelled_cut_set, _repeated_node])
def test_a_released_cut_set_has_one_spelling(release, respell: Callable) -> None:
    """A group's cut-set label lists its nodes sorted, each once. The verifier read labels
    as sets, so a permutation (log2 k! bits per group) or a repeated node verified."""
    files, data, params = release
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    label = next(v for v in groups["codes"] if ";" in v)
    groups.loc[groups["codes"] == label, "codes"] = respell(label.split(";"))
    planted = {**files, "groups.csv": groups.to_csv(index=False).encode()}
    report = verifier.verify(planted, data, params)
    assert "released values public" in {r.name for r in report.failures}


def _decimal_point(label: str) -> str:
    lo, hi = label[1:-1].split(",")
    return f"[{lo}.0,{hi})"


def test_an_interval_label_has_one_spelling_in_the_cut_and_groups(numerical_release) -> None:
    """``[46.0,47)`` for ``[46,47)``, written alike in cut.json and the groups, verified:
    a free bit per interval label."""
    files, data, params = numerical_release
    doc = json.loads(files["cut.json"])
    age = _attr(doc, "numerical")
    old = age["cut"][1]
    age["cut"][1] = _decimal_point(old)
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    groups.loc[groups["age"] == old, "age"] = _decimal_point(old)
    planted = {**files, "cut.json": _dump(doc),
               "groups.csv": groups.to_csv(index=False).encode()}
    assert not verifier.verify(planted, data, params).holds


def test_an_interval_label_has_one_spelling_in_the_ledger(numerical_release) -> None:
    files, data, params = numerical_release
    ledger = json.loads(files["ledger.json"])
    split = _first(ledger, "split")
    split["detail"]["interval"] = _decimal_point(split["detail"]["interval"])
    split["touched"] = f"records with age in {split['detail']['interval']}"
    report = verifier.verify({**files, "ledger.json": _dump(ledger)}, data, params)
    assert "charges complete and scoped" in {r.name for r in report.failures}
