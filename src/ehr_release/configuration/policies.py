"""Utility policies: the sets of diagnosis codes a planned study needs kept together.

A policy is a collection of *disjoint* utility constraints, each a set of codes (e.g. every
code under ICD-9 296). Anonymizers that honour policies (Disassociation, ArtUC) try to keep
the codes of one constraint in the same published chunk or generalized item, so counts over
that constraint stay accurate. Disjointness is what makes "the constraint of a code" well
defined, so overlapping constraints are refused here, once, with the offending code named.

Policies are built for the user from a short specification string (see :data:`POLICY_SYNTAX`):

* ``hierarchy:3digit|section|chapter`` — one constraint per ICD-9 3-digit category, section
  or chapter (the paper's level 1, 2, 3 policies);
* ``similar:N`` — groups of N neighbouring sibling codes in hierarchy order (sim N);
* ``frequent:S`` — frequent itemsets with support ≥ S percent of the records, made disjoint
  (sup S);
* a path to a YAML file of explicit code sets (read by :func:`resolve_policy`, the one
  function here that does I/O; :func:`build_policy` takes the file's text).

Nothing here depends on a particular algorithm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ehr_release.core.errors import ConfigError, ParameterError
from ehr_release.model.hierarchy import Hierarchy, code_hierarchy, icd9_hierarchy

if TYPE_CHECKING:
    from ehr_release.model.dataset import Dataset

POLICY_SYNTAX = ("hierarchy:3digit|section|chapter, similar:N (N ≥ 1), frequent:S "
                 "(S = minimum support in percent, 0 < S ≤ 100) or a path to a .yaml/.yml file")
HIERARCHY_LEVELS = {"3digit": 3, "section": 2, "chapter": 1}
#: Largest itemset the frequency-based policy mines (the paper's constraints are small).
FREQUENT_MAX_SIZE = 4


@dataclass(frozen=True)
class UtilityPolicy:
    """Disjoint utility constraints, each a non-empty set of codes.

    Raises
    ------
    ConfigError
        If a constraint is empty or two constraints share a code.
    """

    name: str
    constraints: tuple[frozenset[str], ...]

    def __post_init__(self) -> None:
        owner: dict[str, int] = {}
        for i, constraint in enumerate(self.constraints):
            if not constraint:
                raise ConfigError(f"policy {self.name!r}: constraint #{i + 1} is empty")
            for code in constraint:
                if code in owner:
                    j = owner[code]
                    first = _preview(self.constraints[j])
                    raise ConfigError(
                        f"policy {self.name!r}: constraints #{j + 1} {first}"
                        f" and #{i + 1} {_preview(constraint)} overlap on code {code!r}; "
                        "utility constraints must be disjoint")
                owner[code] = i

    def __len__(self) -> int:
        return len(self.constraints)

    def constraint_of(self) -> dict[str, int]:
        """Code → index of the constraint holding it (codes in no constraint are absent)."""
        return {code: i for i, c in enumerate(self.constraints) for code in c}

    def restricted_to(self, codes: Iterable[str]) -> UtilityPolicy:
        """The same policy keeping only ``codes`` (constraints left empty are dropped)."""
        keep = set(codes)
        kept = tuple(c & keep for c in self.constraints)
        return UtilityPolicy(self.name, tuple(c for c in kept if c))


def _preview(codes: Collection[str], n: int = 4) -> str:
    shown = sorted(codes)
    more = f", … (+{len(shown) - n})" if len(shown) > n else ""
    return "{" + ", ".join(shown[:n]) + more + "}"


# --------------------------------------------------------------------------- builders
def hierarchy_policy(codes: Iterable[str], level: str,
                     hierarchy: Hierarchy | None = None) -> UtilityPolicy:
    """One constraint per ancestor at ``level`` (``3digit``, ``section`` or ``chapter``).

    Codes at or above the level form their own group; codes unknown to the hierarchy belong
    to no constraint (they are still anonymized, just not kept together with others).
    """
    if level not in HIERARCHY_LEVELS:
        raise ParameterError("policy", f"hierarchy level must be one of "
                             f"{', '.join(HIERARCHY_LEVELS)}", level)
    h = hierarchy or icd9_hierarchy()
    depth = HIERARCHY_LEVELS[level]
    groups: dict[str, set[str]] = {}
    for code in sorted(set(codes)):
        if code in h and code != h.root:
            groups.setdefault(h.ancestor_at_level(code, depth), set()).add(code)
    return UtilityPolicy(f"hierarchy:{level}",
                         tuple(frozenset(groups[a]) for a in sorted(groups)))


def _hierarchy_order(h: Hierarchy, codes: set[str]) -> list[str]:
    """``codes`` in depth-first order of the hierarchy (siblings next to each other)."""
    out: list[str] = []
    stack = [h.root]
    while stack:
        node = stack.pop()
        if node in codes:
            out.append(node)
        stack.extend(reversed(h.children.get(node, [])))
    return out


def similarity_policy(codes: Iterable[str], n: int,
                      hierarchy: Hierarchy | None = None) -> UtilityPolicy:
    """Constraints of ``n`` neighbouring codes in hierarchy order, never crossing a chapter.

    The paper's "sim N" policy groups N sibling 5-digit codes (295.00 … 295.04). Ordering the
    hierarchy's leaves depth-first puts siblings side by side; cutting that order into runs of
    ``n`` inside each chapter gives groups of siblings (or, when a parent has fewer than ``n``
    children, of its nearest cousins). The groups are fixed by the hierarchy, not by the data,
    and then restricted to ``codes``; codes unknown to the hierarchy belong to no constraint.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError("policy", "similar:N needs an integer N ≥ 1", n)
    h = hierarchy or icd9_hierarchy()
    present = {c for c in codes if c in h and c != h.root}
    universe = {node for node in h.parent if h.is_leaf(node)} | present
    runs: dict[str, list[str]] = {}
    for code in _hierarchy_order(h, universe):
        runs.setdefault(h.ancestor_at_level(code, 1), []).append(code)
    groups: list[frozenset[str]] = []
    for chapter in runs.values():
        for start in range(0, len(chapter), n):
            group = frozenset(chapter[start:start + n]) & present
            if group:
                groups.append(group)
    return UtilityPolicy(f"similar:{n}", tuple(groups))


def frequent_itemsets(code_sets: Sequence[Collection[str]], min_count: int,
                      max_size: int = FREQUENT_MAX_SIZE) -> dict[frozenset[str], int]:
    """Itemsets of 1..``max_size`` codes held by at least ``min_count`` records (Apriori).

    Each frequent code is a bitset over records (a Python int), so the support of a candidate
    is the popcount of an AND: cheap enough for hundreds of thousands of records.
    """
    import numpy as np  # here: checking a policy's syntax needs neither numpy nor YAML

    if min_count < 1:
        raise ParameterError("min_count", "must be ≥ 1", min_count)
    counts = Counter(code for s in code_sets for code in s)
    frequent = sorted(c for c, n in counts.items() if n >= min_count)
    n_records = len(code_sets)
    position = {c: i for i, c in enumerate(frequent)}
    columns: list[list[int]] = [[] for _ in frequent]
    for row, codes in enumerate(code_sets):
        for code in codes:
            if code in position:
                columns[position[code]].append(row)
    bits: dict[str, int] = {}
    for code, rows in zip(frequent, columns, strict=True):
        mask = np.zeros(n_records, dtype=bool)
        mask[rows] = True
        bits[code] = int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")
    out: dict[frozenset[str], int] = {frozenset([c]): counts[c] for c in frequent}
    level: dict[tuple[str, ...], int] = {(c,): bits[c] for c in frequent}
    for size in range(2, max_size + 1):
        nxt: dict[tuple[str, ...], int] = {}
        keys = sorted(level)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                if a[:-1] != b[:-1]:
                    break
                cand = (*a, b[-1])
                if any(sub not in level for sub in combinations(cand, size - 1)):
                    continue
                joint = level[a] & bits[b[-1]]
                support = joint.bit_count()
                if support >= min_count:
                    nxt[cand] = joint
                    out[frozenset(cand)] = support
        if not nxt:
            break
        level = nxt
    return out


def frequent_policy(code_sets: Sequence[Collection[str]], min_support_percent: float,
                    max_size: int = FREQUENT_MAX_SIZE) -> UtilityPolicy:
    """Frequent itemsets (support ≥ S % of records) made disjoint, larger itemsets first.

    The paper mines them with FP-Growth; any miner gives the same itemsets. Disjointness is
    made greedily: itemsets by size, then support, descending (ties by their codes), each
    kept only if it shares no code with one kept before.
    """
    import numpy as np

    if not 0 < min_support_percent <= 100:
        raise ParameterError("policy", "frequent:S needs 0 < S ≤ 100 (percent of records)",
                             min_support_percent)
    min_count = max(1, int(np.ceil(min_support_percent / 100 * len(code_sets))))
    found = frequent_itemsets(code_sets, min_count, max_size)
    order = sorted(found, key=lambda s: (-len(s), -found[s], sorted(s)))
    taken: set[str] = set()
    chosen: list[frozenset[str]] = []
    for itemset in order:
        if taken.isdisjoint(itemset):
            chosen.append(itemset)
            taken |= itemset
    return UtilityPolicy(f"frequent:{min_support_percent:g}", tuple(chosen))


def policy_from_data(data: Any, name: str = "yaml") -> UtilityPolicy:
    """A policy from parsed YAML/JSON: a list of code lists, or a mapping name → code list,
    optionally under a top-level ``constraints`` key. Codes must be strings: YAML reads an
    unquoted ``296.00`` as the number 296.0, which would silently name another code.
    """
    if isinstance(data, Mapping) and set(data) == {"constraints"}:
        data = data["constraints"]
    if isinstance(data, Mapping):
        items = [(str(label), codes) for label, codes in data.items()]
    elif isinstance(data, list):
        items = [(f"#{i + 1}", codes) for i, codes in enumerate(data)]
    else:
        raise ConfigError(f"policy {name!r}: expected a list of code lists or a mapping "
                          f"name → code list, got {type(data).__name__}")
    constraints: list[frozenset[str]] = []
    for label, codes in items:
        if not isinstance(codes, list) or not codes:
            raise ConfigError(f"policy {name!r}: constraint {label} must be a non-empty list")
        bad = [c for c in codes if not isinstance(c, str)]
        if bad:
            raise ConfigError(f"policy {name!r}: constraint {label} has non-string code "
                              f"{bad[0]!r}; quote ICD-9 codes in YAML (\"296.00\")")
        if len(set(codes)) != len(codes):
            raise ConfigError(f"policy {name!r}: constraint {label} repeats a code")
        constraints.append(frozenset(c.strip() for c in codes))
    return UtilityPolicy(name, tuple(constraints))


def parse_policy_yaml(text: str, name: str = "yaml") -> UtilityPolicy:
    """A policy from the text of a YAML file (see :func:`policy_from_data` for the shape)."""
    import yaml

    from ehr_release.configuration.limits import load_config_yaml

    try:
        data = load_config_yaml(text, f"policy {name!r}")
    except yaml.YAMLError as exc:
        raise ConfigError(f"policy {name!r}: not valid YAML ({exc})") from None
    return policy_from_data(data, name)


# --------------------------------------------------------------------------- spec strings
@dataclass(frozen=True)
class PolicySpec:
    """A parsed policy string: ``kind`` is hierarchy, similar, frequent or file."""

    kind: str
    argument: str

    def __str__(self) -> str:
        return self.argument if self.kind == "file" else f"{self.kind}:{self.argument}"


def parse_policy_spec(spec: str) -> PolicySpec:
    """Check the syntax of a policy string (not the file's content, which is read later)."""
    text = str(spec).strip()
    kind, sep, arg = text.partition(":")
    if sep and kind == "hierarchy":
        if arg not in HIERARCHY_LEVELS:
            raise ParameterError("policy", f"must be {POLICY_SYNTAX}", spec)
        return PolicySpec("hierarchy", arg)
    if sep and kind == "similar":
        if not arg.isdigit() or int(arg) < 1:
            raise ParameterError("policy", f"must be {POLICY_SYNTAX}", spec)
        return PolicySpec("similar", str(int(arg)))
    if sep and kind == "frequent":
        try:
            value = float(arg)
        except ValueError:
            raise ParameterError("policy", f"must be {POLICY_SYNTAX}", spec) from None
        if not 0 < value <= 100:
            raise ParameterError("policy", f"must be {POLICY_SYNTAX}", spec)
        return PolicySpec("frequent", f"{value:g}")
    if text.lower().endswith((".yaml", ".yml")):
        return PolicySpec("file", text)
    raise ParameterError("policy", f"must be {POLICY_SYNTAX}", spec)


def build_policy(spec: PolicySpec | str, code_sets: Sequence[Collection[str]], *,
                 yaml_text: str | None = None,
                 hierarchy: Hierarchy | None = None) -> UtilityPolicy:
    """The policy a spec names, built over the codes of ``code_sets``.

    For a file spec the caller reads the file and passes its text as ``yaml_text``.
    """
    parsed = spec if isinstance(spec, PolicySpec) else parse_policy_spec(spec)
    if parsed.kind == "file":
        if yaml_text is None:
            raise ConfigError(f"policy file {parsed.argument!r} was not read")
        return parse_policy_yaml(yaml_text, parsed.argument)
    codes = {c for s in code_sets for c in s}
    if parsed.kind == "hierarchy":
        return hierarchy_policy(codes, parsed.argument, hierarchy)
    if parsed.kind == "similar":
        return similarity_policy(codes, int(parsed.argument), hierarchy)
    return frequent_policy(code_sets, float(parsed.argument))


def resolve_policy(spec: str, dataset: Dataset) -> UtilityPolicy:
    """The policy a parameter names, over the dataset's codes; reads YAML files here."""
    parsed: PolicySpec = parse_policy_spec(spec)
    text = None
    if parsed.kind == "file":
        path = Path(parsed.argument).expanduser()
        from ehr_release.configuration.limits import read_config_text

        try:
            text = read_config_text(path, f"policy file {str(path)!r}")
        except OSError as exc:
            raise ConfigError(f"policy file {str(path)!r} cannot be read: "
                              f"{exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:  # fix (issue 8 fuzzing): a binary policy file
            raise ConfigError(f"policy file {str(path)!r} is not UTF-8 text: {exc}") from None
    return build_policy(parsed, dataset.code_sets(), yaml_text=text,
                        hierarchy=code_hierarchy(dataset.code_system))
