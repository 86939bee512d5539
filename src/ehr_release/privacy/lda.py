"""Independent check of an LDA release: k-anonymity of trajectories, from the bytes.

Nothing here comes from ``ehr_release.algorithms``: the JSON Lines are parsed strictly, the
age hierarchy is rebuilt from its domain (blocks of 2^l years aligned to their size), ICD
ancestry is walked on the shared :class:`~ehr_release.model.hierarchy.Hierarchy` with plain
parent links (no ancestor tables, no LCAs), and the loss of each record is recomputed with
exact integer arithmetic instead of the algorithm's floats — so a bug in the anonymizer's
alignment, clustering or loss code cannot vouch for itself here.

Requirements (spec §"Verifying releases"): one record per patient; identical published
trajectories form groups of ≥ k; each published trajectory embeds, in order, into its
original (every published value an ancestor-or-self of the original value); the declared
ILM/ALM and settings equal what is recomputed here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ehr_release.model.hierarchy import Hierarchy
from ehr_release.model.reports import Requirement, VerificationReport
from ehr_release.privacy.canonical_lines import forget as forget_match
from ehr_release.privacy.canonical_lines import lines_match
from ehr_release.privacy.closed_world import ListOf, Obj, TupleOf
from ehr_release.privacy.json_columns import all_conform, forget, loads_lines, paused_gc
from ehr_release.privacy.json_lines import (
    MalformedRelease,
    one_record_each,
    release_lines,
    release_meta,
)

if TYPE_CHECKING:
    from ehr_release.model.dataset import Dataset

NAME = "lda"
RECORDS_FILE = "trajectories.jsonl"
META_FILE = "lda.json"
#: The alignment method each registered variant runs (``lda.json`` names both).
METHODS = {"lda": "ags", "lda-baseline": "baseline"}
#: How close a stated loss could be checked (the algorithm sums floats, this side exact
#: integers): why a release may not state one (:func:`_declared`).
LOSS_TOLERANCE = 1e-9
_SHOW = 10  # how many offending patients a requirement's evidence names

Original = Sequence[tuple[str, int]]
# a line canonical_lines.lines_match vouched for: its pseudonym and its trajectory's text
_CUT = re.compile(r'^\{"patient_id": "([^"]*)", "trajectory": (.*)\}$', re.M)
_LINE = Obj({"patient_id": "str", "trajectory": ListOf(TupleOf(("str", TupleOf(("int", "int")))))})


@dataclass(frozen=True)
class LdaSettings:
    """What the release must satisfy and how its loss is measured (the run's parameters)."""

    k: int
    w_icd: float = 0.5
    w_age: float = 0.5
    leaf_count: int = 0
    age_first: int = 1
    age_depth: int = 7  # 2**7 = 128 ages: 1–128 in the thesis


class _Trees:
    """Leaf counts and the age hierarchy's blocks for one verification."""

    def __init__(self, hierarchy: Hierarchy, s: LdaSettings) -> None:
        self.h, self.s = hierarchy, s
        self.age_size = 1 << s.age_depth
        self.age_last = s.age_first + self.age_size - 1
        self._lc: dict[str, int] = {}

    @cached_property
    def icd_size(self) -> int:
        return len(self.h.leaves_under(self.h.root))

    def is_block(self, lo: int, hi: int) -> bool:
        width = hi - lo + 1
        return (self.s.age_first <= lo and hi <= self.age_last and width >= 1
                and width & (width - 1) == 0 and (lo - self.s.age_first) % width == 0)

    def icd_l(self, node: str) -> int:
        if node not in self._lc:
            n = len(self.h.leaves_under(node))
            self._lc[node] = self.s.leaf_count if self.h.is_leaf(node) else n
        return self._lc[node]


@dataclass(frozen=True)
class _Groups:
    """The published trajectories as groups of identical ones: per record its group, per
    group (in order of first appearance) the trajectory and its ``json.dumps`` text (made
    on demand: only the small groups and the smallest are shown)."""

    of_record: np.ndarray
    trajs: list[list[Any]]
    render: Callable[[int], str]

    @staticmethod
    def of(keys: list[Any], trajs: Callable[[list[Any]], list[list[Any]]],
           render: Callable[[Any], str]) -> _Groups:
        """Records grouped by ``keys`` (one per record, equal iff the trajectories are);
        ``trajs`` parses the distinct keys, ``render`` renders one."""
        ids = {key: i for i, key in enumerate(dict.fromkeys(keys))}
        of_record = np.fromiter(map(ids.__getitem__, keys), dtype=np.int64, count=len(keys))
        distinct = list(ids)
        return _Groups(of_record, trajs(distinct), lambda g: render(distinct[g]))


Records = tuple[list[str], _Groups]  # pseudonyms; the published trajectories, grouped


def _parse(files: Mapping[str, bytes], trees: _Trees) -> tuple[Records, dict[str, Any]]:
    """The records from the bytes when every line is its canonical rendering in plain
    text (:mod:`.canonical_lines`), else column-wise when every line is plainly in shape,
    else line by line, which names the first departure; each faster reader also requires
    every pair valid. The verdict is the per-line reader's either way: the fast passes
    only ever refuse more, and then defer."""
    fast = _canonical(files, trees)
    if fast is None:
        fast = _columns(files, trees)
    if fast is not None:
        return fast, release_meta(files, META_FILE)
    return _lines(files, trees)


def _canonical(files: Mapping[str, bytes], trees: _Trees) -> Records | None:
    """Pseudonyms and trajectory texts cut from lines proven canonical: each trajectory's
    text is then its ``json.dumps`` (plain ASCII, default separators), equal texts are
    equal trajectories, and only the distinct ones are parsed."""
    if RECORDS_FILE not in files or META_FILE not in files:
        return None
    data = files[RECORDS_FILE]
    matched = lines_match(data, _LINE)
    forget_match()  # the closed world's match, kept for this reader
    if not matched:
        return None
    rows = _CUT.findall(data.decode("ascii"))
    groups = _Groups.of(list(map(itemgetter(1), rows)), _parsed, str)
    if not _pairs_valid(groups.trajs, trees):
        return None
    return list(map(itemgetter(0), rows)), groups


def _parsed(texts: list[Any]) -> list[list[Any]]:
    return list(map(orjson.loads, texts))


def _columns(files: Mapping[str, bytes], trees: _Trees) -> Records | None:
    if RECORDS_FILE not in files or META_FILE not in files:
        return None
    objects = loads_lines(files[RECORDS_FILE])
    conform = objects is not None and all_conform(objects, _LINE)
    forget()  # the closed world's parse (and its check), kept for this reader
    if not conform:
        return None
    pids = list(map(itemgetter("patient_id"), objects))
    trajs = list(map(itemgetter("trajectory"), objects))
    if not _pairs_valid(trajs, trees):
        return None
    return pids, _grouped(trajs)


def _grouped(trajs: list[list[Any]]) -> _Groups:
    # identical trajectories have identical compact renderings (only text and integers)
    return _Groups.of(list(map(orjson.dumps, trajs)), _parsed, _rendered)


def _pairs_valid(trajs: list[list[Any]], trees: _Trees) -> bool:
    """Whether every node is in the hierarchy and every age range a block of its domain."""
    flat = list(chain.from_iterable(trajs))
    if not all(node in trees.h for node in set(map(itemgetter(0), flat))):
        return False
    try:
        block = np.fromiter(chain.from_iterable(map(itemgetter(1), flat)), dtype=np.int64,
                            count=2 * len(flat)).reshape(-1, 2)
    except OverflowError:  # beyond 64 bits: no block, and the per-line reader says so
        return False
    lo, hi = block[:, 0], block[:, 1]
    if not ((trees.s.age_first <= lo) & (lo <= hi) & (hi <= trees.age_last)).all():
        return False
    width = hi - lo + 1  # in the domain now: no overflow
    return bool(((width & (width - 1) == 0) & ((lo - trees.s.age_first) % width == 0)).all())


def _lines(files: Mapping[str, bytes], trees: _Trees) -> tuple[Records, dict[str, Any]]:
    pids, trajs = [], []
    for no, obj in release_lines(files, RECORDS_FILE, META_FILE, ("patient_id", "trajectory")):
        pid, traj = obj["patient_id"], obj["trajectory"]
        if not isinstance(pid, str) or not isinstance(traj, list):
            raise MalformedRelease(f"line {no}: patient_id must be text and trajectory a list")
        for item in traj:
            _check_pair(item, no, trees)
        pids.append(pid)
        trajs.append(traj)
    return (pids, _grouped(trajs)), release_meta(files, META_FILE)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_pair(item: object, no: int, trees: _Trees) -> None:
    ok = (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
          and isinstance(item[1], list) and len(item[1]) == 2 and all(map(_is_int, item[1])))
    if not ok:
        raise MalformedRelease(f"line {no}: every pair must look like [\"ICD\", [first, last]]")
    code, (lo, hi) = item
    if code not in trees.h:
        raise MalformedRelease(f"line {no}: a code is not a node of the ICD hierarchy")
    if not trees.is_block(lo, hi):
        raise MalformedRelease(f"line {no}: an age range is not a block of the age hierarchy "
                         f"{trees.s.age_first}–{trees.age_last}")


def embeddings(trees: _Trees, originals: Sequence[Original],
               published: Sequence[Sequence[Sequence[Any]]]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (original, published) pair: whether the published trajectory embeds in order
    into the original, and the loss numerators (ΔL ICD, ΔL Age) of its cheapest embedding.

    Published pairs are ``(ICD node, (first age, last age))`` in any sequence type. The loss
    of an embedding charges a matched original pair L(published value) − L(original value)
    in each attribute and a suppressed one L(root) − L(original value). Matching original
    pair h to published pair j instead of suppressing it changes the charge by
    L(node_j) − L(ICD root) and L(block_j) − L(Age root): by the published pair alone. Every
    embedding matches each published pair exactly once, so every embedding costs the same

        ΔL = Σ_h (L(root) − L(original_h)) − Σ_j (L(root) − L(published_j))

    per attribute, whatever the weights — the cheapest is any one, and ties cannot split ICD
    from Age loss. What remains is whether one exists: a greedy scan (each published pair
    takes the earliest original pair it covers, which never loses for a subsequence test),
    one step per original position over all pairs at once. The property tests hold this
    equal to the minimum over every embedding (a one-pair table and brute force).
    """
    return _embeddings(trees, originals, published,
                       np.arange(len(published), dtype=np.int64))


def _embeddings(trees: _Trees, originals: Sequence[Original],
                groups: Sequence[Sequence[Sequence[Any]]], of_pair: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`embeddings` of each ``originals[i]`` and ``groups[of_pair[i]]``: the
    published side flattened and its loss summed once per distinct trajectory."""
    root_i, root_a, leaf = trees.icd_l(trees.h.root), trees.age_size, trees.s.leaf_count
    n_len = np.fromiter(map(len, originals), dtype=np.int64, count=len(originals))
    g_len = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
    m_len = g_len[of_pair]
    flat_o = list(chain.from_iterable(originals))
    flat_p = list(chain.from_iterable(groups))
    code_id = {c: i for i, c in enumerate(dict.fromkeys(map(itemgetter(0), flat_o)))}
    node_id = {v: i for i, v in enumerate(dict.fromkeys(map(itemgetter(0), flat_p)))}
    code = np.fromiter(map(code_id.__getitem__, map(itemgetter(0), flat_o)), dtype=np.int64,
                       count=len(flat_o))
    age = np.fromiter(map(itemgetter(1), flat_o), dtype=np.int64, count=len(flat_o))
    node = np.fromiter(map(node_id.__getitem__, map(itemgetter(0), flat_p)), dtype=np.int64,
                       count=len(flat_p))
    block = np.fromiter(chain.from_iterable(map(itemgetter(1), flat_p)), dtype=np.int64,
                        count=2 * len(flat_p)).reshape(-1, 2)
    lo, hi = block[:, 0], block[:, 1]
    covers = np.zeros((max(len(code_id), 1), max(len(node_id), 1)), dtype=bool)
    for c, i in code_id.items():  # ancestor-or-self, walked on the parent links
        for v in (c, *trees.h.ancestors(c)):
            if v in node_id:
                covers[i, node_id[v]] = True
    o_start = np.cumsum(n_len) - n_len
    p_start = (np.cumsum(g_len) - g_len)[of_pair]
    j = np.zeros(len(originals), dtype=np.int64)  # published pairs matched so far
    for h in range(int(n_len.max(initial=0))):
        act = np.flatnonzero((n_len > h) & (j < m_len))
        o, q = o_start[act] + h, p_start[act] + j[act]
        hit = covers[code[o], node[q]] & (lo[q] <= age[o]) & (age[o] <= hi[q])
        j[act[hit]] += 1
    embeds = j == m_len
    l_code = np.array([trees.icd_l(c) for c in code_id] or [0], dtype=np.int64)
    l_node = np.array([trees.icd_l(v) for v in node_id] or [0], dtype=np.int64)
    l_block = np.where(hi == lo, leaf, hi - lo + 1)
    d_icd = (_row_sums(root_i - l_code[code], n_len)
             - _row_sums(root_i - l_node[node], g_len)[of_pair])
    d_age = n_len * (root_a - leaf) - _row_sums(root_a - l_block, g_len)[of_pair]
    return embeds, d_icd, d_age


def _row_sums(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Exact integer sums of consecutive runs of ``values`` of these lengths."""
    ends = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    stop = np.cumsum(lengths)
    return ends[stop] - ends[stop - lengths]


def check_trajectories(files: Mapping[str, bytes], patient_ids: Sequence[str],
               trajectories: Sequence[Original], hierarchy: Hierarchy, settings: LdaSettings,
               algorithm: str = NAME) -> VerificationReport:
    """Re-verify an LDA release.

    Parameters
    ----------
    files
        The release files (``trajectories.jsonl``, ``lda.json``).
    patient_ids, trajectories
        The original data: per patient its (ICD code, age) pairs, ordered by age.
    hierarchy
        The ICD hierarchy the release generalizes into.
    settings
        k, weights, leaf convention and age domain of the run.

    Returns
    -------
    VerificationReport
        Holds only if every requirement passed; a malformed release fails its format check.
    """
    with paused_gc():  # acyclic values built in bulk (see json_columns.paused_gc)
        return _check(files, patient_ids, trajectories, hierarchy, settings, algorithm)


def _check(files: Mapping[str, bytes], patient_ids: Sequence[str],
           trajectories: Sequence[Original], hierarchy: Hierarchy, settings: LdaSettings,
           algorithm: str) -> VerificationReport:
    trees = _Trees(hierarchy, settings)
    fmt = (f"{RECORDS_FILE} lines of patient_id and trajectory of [ICD node, age block]; "
           "values are nodes of the hierarchies")
    try:
        (pids, groups), meta = _parse(files, trees)
    except (MalformedRelease, UnicodeDecodeError) as exc:
        return VerificationReport(algorithm, [Requirement("release format", fmt, str(exc),
                                                          False)])
    reqs = [Requirement("release format", fmt, f"{len(pids)} records parsed", True)]
    original = dict(zip(patient_ids, trajectories, strict=True))
    reqs.append(one_record_each(
        "one record per patient", f"each of the {len(original)} patients exactly once",
        original, pids, _SHOW))
    reqs.append(_k_anonymity(groups, settings.k))
    # a patient listed twice is judged on its last record (and fails the check above)
    last = dict(zip(pids, range(len(pids)), strict=True))
    if original.keys() >= last.keys():
        known = len(pids)
    else:
        last = {pid: i for i, pid in enumerate(pids) if pid in original}
        known = sum(pid in original for pid in pids)
    records = np.fromiter(last.values(), dtype=np.int64, count=len(last))
    judged = list(map(original.__getitem__, last))
    embeds, d_icd, d_age = _embeddings(trees, judged, groups.trajs, groups.of_record[records])
    bad = list(compress(last, ~embeds))
    reqs.append(Requirement(
        "truthful generalization", "every published trajectory embeds in order into its "
        "original, each value an ancestor-or-self of the original value",
        f"{len(bad)} of {known} trajectories do not embed", not bad,
        {"patients": bad[:_SHOW]}))
    lengths = np.fromiter(map(len, judged), dtype=np.int64, count=len(judged))
    reqs.append(_declared(meta, trees, lengths, d_icd, d_age, bool(bad), algorithm))
    return VerificationReport(algorithm, reqs)


def _k_anonymity(groups: _Groups, k: int) -> Requirement:
    by_pairs = np.bincount(groups.of_record, minlength=len(groups.trajs)).tolist()
    least = min(by_pairs, default=0)
    # rendered only where shown or ordered: the small groups and the smallest
    shown_groups = {groups.render(g): n for g, n in enumerate(by_pairs) if n < k or n == least}
    small = sorted((n, t) for t, n in shown_groups.items() if n < k)
    size, traj = min((n, t) for t, n in shown_groups.items()) if shown_groups else (0, "[]")
    # The trajectory is named only when its group is too small (for the terminal; stored
    # copies drop it, reports.Requirement.stored): one that held is a count.
    shown = f", trajectory {traj if len(traj) <= 200 else traj[:200] + '…'}" if small else ""
    return Requirement(
        "k-anonymity", f"every published trajectory is shared by ≥ {k} records",
        f"smallest group {size} records{shown}; {len(small)} groups below {k}",
        bool(shown_groups) and not small,
        {"groups": len(by_pairs), "small_groups": [{"size": n, "trajectory": t[:200]}
                                                 for n, t in small[:_SHOW]]})


_PLAIN = re.compile(rb"[\x20-\x5b\x5d-\x7e]*")  # printable ASCII but the backslash


def _rendered(compact: bytes) -> str:
    """``json.dumps`` of a trajectory from its orjson rendering ``compact``.

    With printable ASCII and no backslash, neither encoder escapes anything, and the two
    differ only by the space ``json.dumps`` puts after each comma — provided no node name
    holds a comma: a trajectory of m pairs renders 2m quotes and 3m − 1 commas (0 for none).
    Anything else is rendered by ``json.dumps`` itself.
    """
    pairs = compact.count(b'"') // 2
    if _PLAIN.fullmatch(compact) and compact.count(b",") == max(3 * pairs - 1, 0):
        return compact.replace(b",", b", ").decode("ascii")
    return json.dumps(orjson.loads(compact))


def _declared(meta: Mapping[str, Any], trees: _Trees, lengths: np.ndarray,
              d_icd: np.ndarray, d_age: np.ndarray, unembedded: bool,
              algorithm: str = NAME) -> Requirement:
    """The settings the release states against the verified ones, and no loss stated.

    ILM and ALM (thesis Def. 8) are recomputed for the report — one entry per patient in
    ``lengths`` (original length) and the loss numerators, summed left to right
    (``np.cumsum``) — but a release may not state them: they are means over the *original*
    trajectory lengths, which the release hides, and this side could only accept a stated
    value within :data:`LOSS_TOLERANCE`, leaving its last digits free to carry anything."""
    s = trees.s
    settings = (("k", s.k), ("w_icd", s.w_icd), ("w_age", s.w_age),
                ("leaf_count", s.leaf_count), ("age_domain", [s.age_first, trees.age_last]),
                ("algorithm", algorithm), ("method", METHODS.get(algorithm)))
    wrong = {key: meta[key] for key, want in settings if key in meta and meta[key] != want}
    stated = sorted(key for key in ("ilm", "alm") if key in meta)
    required = ("declared algorithm, method, k, weights, leaf convention and age domain "
                "equal the verified settings; no loss stated (measured on the original "
                "data, it is the utility report's)")
    if unembedded:
        return Requirement("declared loss", required, "not recomputable: some trajectories do "
                           "not embed", False, {"settings_differ": wrong})
    counted = lengths > 0
    per_icd = d_icd[counted] / trees.icd_size / lengths[counted]
    per_age = d_age[counted] / trees.age_size / lengths[counted]
    n = int(counted.sum())
    ilm, alm = ((float(np.cumsum(per_icd)[-1]) / n, float(np.cumsum(per_age)[-1]) / n)
                if n else (0.0, 0.0))
    return Requirement("declared loss", required,
                       f"recomputed ILM {ilm:.6f}, ALM {alm:.6f}; the release states "
                       f"{' and '.join(stated) if stated else 'no loss'}",
                       not wrong and not stated,
                       {"ilm": ilm, "alm": alm, "settings_differ": wrong,
                        "loss_stated": len(stated)})


def verify(files: Mapping[str, bytes], original: Dataset, params: Mapping[str, Any], *,
           algorithm: str = NAME) -> VerificationReport:
    """The entry point every family shares: ``files`` against the original trajectories,
    for the run's k, weights and leaf convention on the thesis' age hierarchy (1–128,
    :class:`LdaSettings`' defaults) and the shipped hierarchy of the extract's code system.
    ``algorithm`` names the registered variant (``lda``, ``lda-baseline``) the report is
    for."""
    from ehr_release.model.hierarchy import code_hierarchy

    settings = LdaSettings(int(params["k"]), float(params["w_icd"]), float(params["w_age"]),
                           int(params["leaf_count"]))
    return check_trajectories(files, original.patient_ids, original.trajectories(),
                              code_hierarchy(original.code_system), settings,
                              algorithm=algorithm)
