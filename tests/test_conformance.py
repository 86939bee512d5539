"""One conformance suite for every registered algorithm (scikit-learn's ``check_estimator``
idea, issue 17): whatever a new algorithm is, the flow can rely on the same contract.

For each entry, on a small case of its own input kind:

1. bad parameters (an unknown name, a missing required one) are refused with
   :class:`ParameterError` naming the parameter;
2. the release is deterministic given a seed (the same bytes twice);
3. the release conforms to the closed-world schema, counts its records, passes the
   independent verifier and the attack audit, and evaluates to a utility report;
4. the verifier catches a planted violation: the release made with weak parameters
   (small k, or a large ε for DiffGen) is checked against strong ones and must fail;
5. free choices (issue 32): where the model leaves a choice the data does not determine
   (GCCens' line order and censored instances, disassociation's subrecord order, clusters,
   chunks and their order), a release choosing otherwise — hand-edited canonical bytes that
   keep the model, keyed on a hidden per-patient bit — is refused by the replay, and honest
   releases never are.

A test also fails when an algorithm is registered without a case here, so a new algorithm
cannot skip the suite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.core.errors import ParameterError
from ehr_release.documents.datasheet import describe_files
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.closed_world import violations
from ehr_release.samples.sample import CLASS_COLUMN, generate_sample, write_sample

from .conftest import SHARED_DATA

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MIMIC = SHARED_DATA / "mimic3-demo"


@dataclass(frozen=True)
class Case:
    """An algorithm's small input, the parameters it publishes with, and the weak/strong
    parameter pair whose mismatch its verifier must catch."""

    dataset: Callable[[Path], Dataset]
    params: Callable[[Path], dict[str, str]]
    weak: dict[str, str]
    strong: dict[str, str]
    required: str  # a required parameter, removed to check the refusal
    seeded: bool = True
    extra: dict[str, str] = field(default_factory=dict)


def _wide(_tmp: Path) -> Dataset:
    return generate_sample(150, seed=11)


def _longitudinal(_tmp: Path) -> Dataset:
    return generate_sample(120, seed=5, longitudinal=True)


def _mimic(_tmp: Path) -> Dataset:
    if not MIMIC.is_dir():
        pytest.skip(f"needs the MIMIC-III demo in {SHARED_DATA}")
    from ehr_release.ingest import read_dataset

    return read_dataset(MIMIC)


def _gccens_sample(tmp: Path) -> Dataset:
    population = generate_sample(300, seed=13)
    write_sample(population, tmp / "population.csv")
    keep = set(population.patient_ids[:120])
    diagnoses = population.diagnoses
    return Dataset(population.patients.loc[sorted(keep)],
                   diagnoses[diagnoses["patient_id"].isin(keep)].reset_index(drop=True),
                   source="first 120 patients of the population")


def _artuc_params(_tmp: Path) -> dict[str, str]:
    return {"config": str(EXAMPLES / "artuc-mimic" / "config.yaml"), "delta": "0.4",
            "m": "2"}


def _artuc_case() -> Case:
    # The configuration carries defaults (k among them): it is what is required.
    return Case(_mimic, _artuc_params, weak={"k": "2"}, strong={"k": "25"},
                required="config")


CASES: dict[str, Case] = {
    "disassociation": Case(_wide, lambda _t: {"m": "2"}, weak={"k": "2"},
                           strong={"k": "40"}, required="k"),
    "artuc": _artuc_case(),
    "artuc-baseline": _artuc_case(),
    "rmr": _artuc_case(),
    "artuc-unconstrained": _artuc_case(),
    "gccens": Case(_gccens_sample, lambda t: {"population": str(t / "population.csv")},
                   weak={"k": "2"}, strong={"k": "60"}, required="k", seeded=False),
    "lda": Case(_longitudinal, lambda _t: {}, weak={"k": "2"}, strong={"k": "40"},
                required="k", seeded=False),
    "lda-baseline": Case(_longitudinal, lambda _t: {}, weak={"k": "2"}, strong={"k": "40"},
                         required="k", seeded=False),
    "diffgen": Case(lambda _t: generate_sample(2000, seed=3),
                    lambda _t: {"h": "3", "taxonomies": "mimic-demo", "eval_runs": "1",
                                "predictors": "age,gender,insurance,codes"},
                    weak={"epsilon": "1000"}, strong={"epsilon": "0.05"},
                    required="epsilon", extra={}),
}


def test_every_registered_algorithm_has_a_conformance_case() -> None:
    assert set(registry.names()) <= set(CASES), set(registry.names()) - set(CASES)


def _params(case: Case, tmp: Path, which: dict[str, str], seed: int | None) -> dict[str, str]:
    given = {**case.params(tmp), **which}
    if case.seeded and seed is not None:
        given["seed"] = str(seed)
    return given


def _release(name: str, case: Case, tmp: Path, which: dict[str, str],
             seed: int | None = 7) -> tuple[dict[str, bytes], dict[str, Any], Dataset]:
    entry = registry.get(name)
    dataset = case.dataset(tmp)
    if name == "diffgen":
        dataset = Dataset(dataset.patients, dataset.diagnoses, class_column=CLASS_COLUMN,
                          source=dataset.source, code_system=dataset.code_system)
    params = entry.parse(_params(case, tmp, which, seed))
    return entry.anonymize(dataset, params, np.random.default_rng(seed)), params, dataset


@pytest.fixture(params=sorted(CASES))
def name(request: pytest.FixtureRequest) -> str:
    if request.param not in registry.names():
        pytest.skip(f"{request.param} is not registered")
    return request.param


def test_bad_parameters_are_refused_naming_the_parameter(name: str, tmp_path: Path) -> None:
    case, entry = CASES[name], registry.get(name)
    given = _params(case, tmp_path, case.weak, None)
    with pytest.raises(ParameterError) as unknown:
        entry.parse({**given, "no_such_parameter": "1"})
    assert unknown.value.parameter == "no_such_parameter"
    without = {k: v for k, v in given.items() if k != case.required}
    with pytest.raises(ParameterError) as missing:
        entry.parse(without)
    assert missing.value.parameter == case.required


def test_release_is_deterministic_given_a_seed(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    first, _, _ = _release(name, case, tmp_path, case.weak)
    second, _, _ = _release(name, case, tmp_path, case.weak)
    assert first == second


def test_release_conforms_verifies_survives_the_attack_and_evaluates(
        name: str, tmp_path: Path) -> None:
    case, entry = CASES[name], registry.get(name)
    files, params, dataset = _release(name, case, tmp_path, case.weak)
    assert entry.schema is not None and list(violations(files, entry.schema)) == []
    # The recipient's datasheet reviews every column this release has, derived ones too.
    unreviewed = [(f.name, r.path) for f in describe_files(files, entry.schema)
                  for r in f.fields if not r.review]
    assert unreviewed == []
    assert entry.count_records is not None and entry.count_records(files) > 0
    report = entry.verify(files, dataset, params)
    assert report.holds, [r.name for r in report.failures]
    assert entry.attack is not None and entry.attack(files, dataset, params).passed
    utility = entry.evaluate(files, dataset, params, np.random.default_rng(1))
    assert utility.algorithm and utility.metrics


def test_verifier_catches_a_planted_violation(name: str, tmp_path: Path) -> None:
    """The weak release, checked against the strong claim: the verifier must refuse it."""
    case, entry = CASES[name], registry.get(name)
    files, _, dataset = _release(name, case, tmp_path, case.weak)
    strong = entry.parse(_params(case, tmp_path, case.strong, 7))
    assert not entry.verify(files, dataset, strong).holds


#: Every algorithm family's verifier, attack and evaluation modules (issue 17: one plug-in
#: shape, the same entry point names and leading parameters in each).
FAMILIES = ("disassociation", "kkm", "gccens", "lda", "diffgen")
EVALUATIONS = ("disassociation", "artuc", "gccens", "lda", "diffgen")


def _leading(module: str, name: str) -> list[str]:
    import importlib
    import inspect

    fn = getattr(importlib.import_module(module), name)
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_the_one_verifier_and_attack_shape(family: str) -> None:
    assert _leading(f"ehr_release.privacy.{family}", "verify") == ["files", "original", "params"]
    assert _leading(f"ehr_release.privacy.attacks.{family}", "attack") == [
        "files", "original", "params"]


@pytest.mark.parametrize("family", EVALUATIONS)
def test_every_family_evaluation_has_the_one_shape(family: str) -> None:
    assert _leading(f"ehr_release.utility.{family}", "evaluate") == [
        "files", "original", "params", "rng"]


# --------------------------------------------------------------------------------------
# Free choices (issue 32): what the model allows but the data does not determine — a line
# order, which instances are censored, the order of subrecords in a chunk — follows a
# documented rule the verifier replays. Each planted release below is hand-edited, canonical
# bytes that keep the model (every other requirement holds); the site's verification must
# refuse it by the replay's requirement alone.

RID = "conformance-free-choices"


def _hidden_bit(source_id: str) -> int:
    """A per-patient bit the recipient cannot see (a hash of the source id)."""
    import hashlib

    return hashlib.sha256(source_id.encode()).digest()[0] & 1


def _site_release(name: str, tmp: Path) -> tuple[Any, dict[str, bytes], dict[str, Any], Dataset]:
    from ehr_release.release.verification import anonymize_as_released

    case, entry = CASES[name], registry.get(name)
    dataset = case.dataset(tmp)
    params = entry.parse(_params(case, tmp, case.weak, 7))
    files = anonymize_as_released(entry, dataset, params, np.random.default_rng(7), RID)
    return entry, files, params, dataset


def _refused_by(entry: Any, files: dict[str, bytes], dataset: Dataset,
                params: dict[str, Any]) -> list[str]:
    from ehr_release.release.verification import verify_release

    return [r.name for r in verify_release(entry, files, dataset, params, RID).failures]


def _gccens_lines(files: dict[str, bytes]) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in files["censored.jsonl"].decode().splitlines()]


def _gccens_bytes(files: dict[str, bytes], lines: list[dict[str, Any]]) -> dict[str, bytes]:
    import json

    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    return {**files, "censored.jsonl": text.encode()}


def _source_of(dataset: Dataset) -> dict[str, str]:
    from ehr_release.governance.pseudonyms import pseudonymizer

    pseudonym = pseudonymizer(RID)
    return {pseudonym(pid): pid for pid in dataset.patient_ids}


def test_gccens_line_order_keyed_on_a_hidden_bit_is_refused(tmp_path: Path,
                                                            ehr_home: Path) -> None:
    entry, files, params, dataset = _site_release("gccens", tmp_path)
    assert _refused_by(entry, files, dataset, params) == []
    source = _source_of(dataset)
    lines = _gccens_lines(files)
    planted = sorted(lines, key=lambda line: (_hidden_bit(source[line["patient_id"]]),
                                              line["patient_id"]))
    assert planted != lines
    assert _refused_by(entry, _gccens_bytes(files, planted), dataset, params) == [
        "line order"]


def test_gccens_over_censoring_keyed_on_a_hidden_bit_is_refused(tmp_path: Path,
                                                                ehr_home: Path) -> None:
    """One more instance dropped on the lines whose patient's hidden bit is 1: censoring
    only lowers counts, so k-map, caps and 'censoring only' all still hold."""
    entry, files, params, dataset = _site_release("gccens", tmp_path)
    source = _source_of(dataset)
    lines, changed = _gccens_lines(files), 0
    for line in lines:
        if line["codes"] and _hidden_bit(source[line["patient_id"]]):
            code = min(line["codes"])
            line["codes"][code] -= 1
            if not line["codes"][code]:
                del line["codes"][code]
            changed += 1
    assert changed
    assert _refused_by(entry, _gccens_bytes(files, lines), dataset, params) == [
        "censoring replayed"]


def _disassociation_doc(tmp: Path) -> tuple[Any, dict[str, Any], dict[str, Any], Dataset,
                                            list[list[int]]]:
    """The honest release as a nested document, and each cluster's records (the anonymizer's
    private bookkeeping: which record each subrecord came from)."""
    from ehr_release.algorithms.disassociation import disassociate_dataset
    from ehr_release.configuration.policies import resolve_policy

    from .disassociation_layout import read_doc

    case, entry = CASES["disassociation"], registry.get("disassociation")
    dataset = case.dataset(tmp)
    params = entry.parse(_params(case, tmp, case.weak, 7))
    result = disassociate_dataset(dataset, params["k"], params["m"],
                                  resolve_policy(params["policy"], dataset),
                                  np.random.default_rng(7))
    files = entry.anonymize(dataset, params, np.random.default_rng(7))
    assert files["release.parquet"] == result.release.to_bytes()
    return entry, read_doc(files["release.parquet"]), params, dataset, [
        c.tolist() for c in result.clusters]


def _multi_chunk_positions(doc: dict[str, Any]) -> int:
    return sum(c["size"] for c in doc["clusters"] if len(c["record_chunks"]) >= 2)


def test_disassociation_chunks_aligned_on_the_true_patient_are_refused(tmp_path: Path) -> None:
    """Position i of every record chunk of a cluster is the cluster's i-th true patient: the
    multisets (hence k^m-anonymity, Guarantee 1, truthfulness) are unchanged."""
    from .disassociation_layout import files_of

    entry, doc, params, dataset, clusters = _disassociation_doc(tmp_path)
    sets = dataset.code_sets()
    for cluster, members in zip(doc["clusters"], clusters, strict=True):
        for n, chunk in enumerate(cluster["record_chunks"]):
            domain = {code for sub in chunk for code in sub}
            cluster["record_chunks"][n] = [sorted(sets[i] & domain) for i in members]
    assert _multi_chunk_positions(doc) > 0
    assert _refused_by(entry, files_of(doc), dataset, params) == ["subrecord order"]


def test_disassociation_chunks_sorted_by_size_are_refused(tmp_path: Path) -> None:
    from .disassociation_layout import files_of

    entry, doc, params, dataset, _ = _disassociation_doc(tmp_path)
    for cluster in doc["clusters"]:
        cluster["record_chunks"] = [sorted(chunk, key=lambda sub: (len(sub), sub))
                                    for chunk in cluster["record_chunks"]]
    assert _refused_by(entry, files_of(doc), dataset, params) == ["subrecord order"]


def test_disassociation_shuffle_keyed_on_a_hidden_bit_is_refused(tmp_path: Path) -> None:
    """Inside each record chunk, the subrecords of patients whose hidden bit is 1 first."""
    from .disassociation_layout import files_of

    entry, doc, params, dataset, clusters = _disassociation_doc(tmp_path)
    sets, ids = dataset.code_sets(), dataset.patient_ids
    for cluster, members in zip(doc["clusters"], clusters, strict=True):
        for n, chunk in enumerate(cluster["record_chunks"]):
            domain = {code for sub in chunk for code in sub}
            cluster["record_chunks"][n] = [sorted(sets[i] & domain) for i in sorted(
                members, key=lambda i: -_hidden_bit(str(ids[i])))]
    assert _refused_by(entry, files_of(doc), dataset, params) == ["subrecord order"]


# Planted choices of HorPart, VerPart and Refine (issue 32): each release below keeps every
# count of k^m-anonymity (chunks, Guarantee 1, truthfulness, structure) and the documented
# subrecord order; only the replay of the clustering, chunking and cluster order refuses it.

def _relabelled(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    rename = {c["id"]: f"{prefix}{c['id']}" for c in doc["clusters"]}
    return {"clusters": [{**c, "id": rename[c["id"]]} for c in doc["clusters"]],
            "joint_clusters": [{**j, "clusters": [rename[x] for x in j["clusters"]]}
                               for j in doc["joint_clusters"]]}


def test_disassociation_clusters_grouped_by_a_hidden_bit_are_refused(tmp_path: Path) -> None:
    """Clusters of bit-0 patients, then clusters of bit-1 patients: each half disassociated
    on its own (k^m-anonymous, truthful), the two releases published as one."""
    from ehr_release.algorithms.disassociation import disassociate_dataset
    from ehr_release.configuration.policies import resolve_policy

    from .disassociation_layout import files_of, in_documented_order, read_doc

    entry, doc, params, dataset, _ = _disassociation_doc(tmp_path)
    policy = resolve_policy(params["policy"], dataset)
    halves = []
    for bit in (0, 1):
        ids = [p for p in dataset.patient_ids if _hidden_bit(str(p)) == bit]
        diagnoses = dataset.diagnoses[dataset.diagnoses["patient_id"].isin(ids)]
        half = Dataset(dataset.patients.loc[ids], diagnoses.reset_index(drop=True),
                       source=f"bit {bit}")
        result = disassociate_dataset(half, params["k"], params["m"], policy,
                                      np.random.default_rng(7))
        halves.append(_relabelled(read_doc(result.release.to_bytes()), f"b{bit}-"))
    planted = in_documented_order({**doc, "clusters": halves[0]["clusters"] +
                                   halves[1]["clusters"], "joint_clusters":
                                   halves[0]["joint_clusters"] + halves[1]["joint_clusters"]})
    assert _refused_by(entry, files_of(planted), dataset, params) == ["choices replayed"]


def test_disassociation_chunks_split_on_a_hidden_bit_are_refused(tmp_path: Path) -> None:
    """In the clusters whose first true patient has hidden bit 1, a record chunk's last code
    moves to a chunk of its own (a sub-domain of a k^m-anonymous chunk is k^m-anonymous,
    and the reconstructible maximum only grows)."""
    from .disassociation_layout import files_of, in_documented_order

    entry, doc, params, dataset, clusters = _disassociation_doc(tmp_path)
    ids, moved = dataset.patient_ids, 0
    for cluster, members in zip(doc["clusters"], clusters, strict=True):
        chunks = cluster["record_chunks"]
        wide = [n for n, chunk in enumerate(chunks) if len({c for s in chunk for c in s}) >= 2]
        if not wide or not _hidden_bit(str(ids[members[0]])):
            continue
        chunk = chunks[wide[0]]
        last = max(c for s in chunk for c in s)
        chunks[wide[0]] = [[c for c in s if c != last] for s in chunk]
        chunks.append([[last] if last in s else [] for s in chunk])
        moved += 1
    assert moved
    assert _refused_by(entry, files_of(in_documented_order(doc)), dataset, params) == [
        "choices replayed"]


def test_disassociation_clusters_in_another_order_are_refused(tmp_path: Path) -> None:
    """Two neighbouring clusters (in no joint cluster) trade places: every figure of the
    model is unchanged, only HorPart's order is not kept."""
    from .disassociation_layout import files_of, in_documented_order

    entry, doc, params, dataset, _ = _disassociation_doc(tmp_path)
    joined = {x for j in doc["joint_clusters"] for x in j["clusters"]}
    listed = doc["clusters"]
    i = next(i for i in range(len(listed) - 1) if not {listed[i]["id"], listed[i + 1]["id"]}
             & joined and listed[i]["record_chunks"] != listed[i + 1]["record_chunks"])
    listed[i], listed[i + 1] = listed[i + 1], listed[i]
    assert _refused_by(entry, files_of(in_documented_order(doc)), dataset, params) == [
        "choices replayed"]


@st.composite
def _policy_cases(draw: st.DrawFn) -> tuple[list[list[str]], int, int, dict[str, int],
                                           int | None]:
    records, k, m = draw(_code_sets())
    groups = draw(st.lists(st.integers(-1, 3), min_size=len(_CODES), max_size=len(_CODES)))
    size = draw(st.one_of(st.none(), st.integers(k, 3 * k)))
    return records, k, m, {c: g for c, g in zip(_CODES, groups, strict=True) if g >= 0}, size


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_policy_cases())
def test_honest_disassociation_is_never_refused_by_the_choices_replay(case: Any) -> None:
    from ehr_release.algorithms.disassociation import disassociate, encode_code_sets
    from ehr_release.privacy.disassociation import check_km
    from ehr_release.privacy.disassociation.replay import Choices

    records, k, m, policy, size = case
    enc = encode_code_sets(records)
    release = disassociate(enc, k, m, np.array([policy.get(c, -1) for c in enc.codes]),
                           np.random.default_rng(0), max_cluster_size=size)
    report = check_km({"release.parquet": release.release.to_bytes()},
                      Dataset.from_records(records), k, m, choices=Choices(policy, size))
    replay = next(r for r in report.requirements if r.name == "choices replayed")
    assert replay.passed and report.holds, report.to_dict()


# Honest releases are never refused by a replay: small random populations, the anonymizer's
# output, the verifier's replay requirement. The replays are exact (no statistical test, so
# no false alarm to bound: an honest release is refused with probability 0, which these
# properties exercise).

_CODES = [f"{c:03d}.{d}" for c in range(100, 104) for d in range(3)]


@st.composite
def _code_sets(draw: st.DrawFn) -> tuple[list[list[str]], int, int]:
    n = draw(st.integers(6, 40))
    # One strategy for every record: making one per record cost more than the test.
    record = st.lists(st.sampled_from(_CODES), max_size=6)
    records = [sorted(set(draw(record))) for _ in range(n)]
    k = draw(st.integers(2, max(2, n // 3)))
    return records, k, draw(st.integers(1, 3))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_code_sets())
def test_honest_disassociation_is_never_refused_by_the_order_replay(case: Any) -> None:
    from ehr_release.algorithms.disassociation import disassociate, encode_code_sets
    from ehr_release.privacy.disassociation import check_km

    records, k, m = case
    enc = encode_code_sets(records)
    release = disassociate(enc, k, m, np.full(enc.n_codes, -1), np.random.default_rng(0))
    report = check_km({"release.parquet": release.release.to_bytes()},
                      Dataset.from_records(records), k, m)
    order = next(r for r in report.requirements if r.name == "subrecord order")
    assert order.passed and report.holds, report.to_dict()


@st.composite
def _kmap_problems(draw: st.DrawFn) -> tuple[list[Counter[str]], list[Counter[str]], int,
                                              dict[str, int]]:
    codes = _CODES[:5]
    counts = st.dictionaries(st.sampled_from(codes), st.integers(1, 3), max_size=4)
    population = [Counter(r) for r in draw(st.lists(counts, min_size=3, max_size=30))]
    chosen = draw(st.lists(st.integers(0, len(population) - 1), min_size=1, max_size=12,
                           unique=True))
    k = draw(st.integers(2, min(8, len(population))))
    caps = draw(st.dictionaries(st.sampled_from([*codes, "*"]), st.integers(0, 3),
                                max_size=3))
    return population, [population[i] for i in chosen], k, caps


@settings(max_examples=60, deadline=None)
@given(_kmap_problems())
def test_honest_gccens_is_never_refused_by_the_censoring_replay(problem: Any) -> None:
    from ehr_release.algorithms.gccens import gccens
    from ehr_release.algorithms.gccens.release import release_files
    from ehr_release.privacy.gccens import check_kmap, policy_cap
    from ehr_release.privacy.gccens_replay import replay_censoring

    population, sample, k, caps = problem
    result = gccens(sample, population, k, caps)
    codes = {c for r in sample for c in r}
    assert replay_censoring(sample, population, k, {c: policy_cap(caps, c) for c in codes}
                            ) == result.released
    ids = [f"p{i:02d}" for i in range(len(sample))]
    files = release_files(ids, result, k=k, population={})
    report = check_kmap(files, ids, sample, population, k, caps)
    assert report.holds, [r.name for r in report.failures]


# --------------------------------------------------------------------------- ICD-10-CM
#: Every algorithm again on an ICD-10-CM extract (issue 35): the same generator over the
#: ICD-10-CM hierarchy, and configurations that name it (``codes: {hierarchy: icd10}``,
#: ``taxonomy: icd10``). Policies, code trees, taxonomies, verifiers and attacks must take
#: the extract's hierarchy, not the ICD-9-CM one.
ICD10 = "icd10"


def _artuc_icd10_params(tmp: Path) -> dict[str, str]:
    folder = tmp / "artuc-icd10"
    if not folder.is_dir():
        folder.mkdir()
        source = EXAMPLES / "artuc-mimic"
        (folder / "ethnicity.csv").write_bytes((source / "ethnicity.csv").read_bytes())
        text = (source / "config.yaml").read_text(encoding="utf-8")
        assert "hierarchy: icd9" in text
        (folder / "config.yaml").write_text(text.replace("hierarchy: icd9", "hierarchy: icd10"),
                                            encoding="utf-8")
    return {"config": str(folder / "config.yaml"), "delta": "0.4", "m": "2"}


def _diffgen_icd10_params(tmp: Path) -> dict[str, str]:
    from ehr_release.configuration.taxonomies import config_path

    path = tmp / "mimic-icd10.yaml"
    text = config_path("mimic-demo").read_text(encoding="utf-8")
    assert "taxonomy: icd9" in text
    path.write_text(text.replace("taxonomy: icd9", "taxonomy: icd10"), encoding="utf-8")
    return {"h": "3", "taxonomies": str(path), "eval_runs": "1",
            "predictors": "age,gender,insurance,codes"}


def _gccens_icd10(tmp: Path) -> Dataset:
    population = generate_sample(300, seed=13, code_system=ICD10)
    write_sample(population, tmp / "population.csv")
    keep = set(population.patient_ids[:120])
    diagnoses = population.diagnoses
    return Dataset(population.patients.loc[sorted(keep)],
                   diagnoses[diagnoses["patient_id"].isin(keep)].reset_index(drop=True),
                   source="first 120 patients of the population", code_system=ICD10)


def _artuc_icd10_case() -> Case:
    return Case(lambda _t: generate_sample(150, seed=11, code_system=ICD10),
                _artuc_icd10_params, weak={"k": "2"}, strong={"k": "40"}, required="config")


ICD10_CASES: dict[str, Case] = {
    "disassociation": Case(lambda _t: generate_sample(150, seed=11, code_system=ICD10),
                           lambda _t: {"m": "2"}, weak={"k": "2"}, strong={"k": "40"},
                           required="k"),
    "artuc": _artuc_icd10_case(),
    "artuc-baseline": _artuc_icd10_case(),
    "rmr": _artuc_icd10_case(),
    "artuc-unconstrained": _artuc_icd10_case(),
    "gccens": Case(_gccens_icd10, lambda t: {"population": str(t / "population.csv")},
                   weak={"k": "2"}, strong={"k": "60"}, required="k", seeded=False),
    "lda": Case(lambda _t: generate_sample(120, seed=5, longitudinal=True, code_system=ICD10),
                lambda _t: {}, weak={"k": "2"}, strong={"k": "40"}, required="k",
                seeded=False),
    "lda-baseline": Case(lambda _t: generate_sample(120, seed=5, longitudinal=True,
                                                    code_system=ICD10),
                         lambda _t: {}, weak={"k": "2"}, strong={"k": "40"}, required="k",
                         seeded=False),
    "diffgen": Case(lambda _t: generate_sample(2000, seed=3, code_system=ICD10),
                    _diffgen_icd10_params, weak={"epsilon": "1000"},
                    strong={"epsilon": "0.05"}, required="epsilon"),
}


def test_every_registered_algorithm_has_an_icd10_case() -> None:
    assert set(registry.names()) <= set(ICD10_CASES), set(registry.names()) - set(ICD10_CASES)


@pytest.fixture(params=sorted(ICD10_CASES))
def icd10_name(request: pytest.FixtureRequest) -> str:
    if request.param not in registry.names():
        pytest.skip(f"{request.param} is not registered")
    return request.param


def test_icd10_release_conforms_verifies_survives_the_attack_and_evaluates(
        icd10_name: str, tmp_path: Path) -> None:
    case, entry = ICD10_CASES[icd10_name], registry.get(icd10_name)
    files, params, dataset = _release(icd10_name, case, tmp_path, case.weak)
    assert dataset.code_system == ICD10
    assert entry.schema is not None and list(violations(files, entry.schema)) == []
    assert entry.count_records is not None and entry.count_records(files) > 0
    report = entry.verify(files, dataset, params)
    assert report.holds, [(r.name, r.measured) for r in report.failures]
    assert entry.attack is not None and entry.attack(files, dataset, params).passed
    utility = entry.evaluate(files, dataset, params, np.random.default_rng(1))
    assert utility.algorithm and utility.metrics


def test_icd10_verifier_catches_a_planted_violation(icd10_name: str, tmp_path: Path) -> None:
    case, entry = ICD10_CASES[icd10_name], registry.get(icd10_name)
    files, _, dataset = _release(icd10_name, case, tmp_path, case.weak)
    strong = entry.parse(_params(case, tmp_path, case.strong, 7))
    assert not entry.verify(files, dataset, strong).holds


@pytest.mark.parametrize("name", ["artuc", "diffgen"])
def test_a_configuration_for_the_other_code_system_is_refused(name: str,
                                                              tmp_path: Path) -> None:
    """An ICD-9 configuration on an ICD-10 extract names the cause, not every code."""
    from ehr_release.core.errors import ConfigError

    case, entry = CASES[name], registry.get(name)
    dataset = ICD10_CASES[name].dataset(tmp_path)
    if name == "diffgen":
        dataset = Dataset(dataset.patients, dataset.diagnoses, class_column=CLASS_COLUMN,
                          code_system=ICD10)
    params = entry.parse(_params(case, tmp_path, case.weak, 7))
    with pytest.raises(ConfigError, match="coded in"):
        entry.anonymize(dataset, params, np.random.default_rng(7))
