"""DiffGen's privacy ledger, replayed: every noise draw and exponential-mechanism choice the
release declares is checked against what the configuration and the published cut allow —
scales, budget shares, the specialization sequence, the bookkeeping and the plain-words
description — and the ledger's ε composed. :mod:`.diffgen` reads the files and runs the
checks on the counts; this module holds the replay it calls.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ehr_release.configuration.taxonomies import DiffGenConfig
from ehr_release.core.errors import EhrReleaseError
from ehr_release.model.hierarchy import Hierarchy

NAME = "diffgen"


_INTERVAL = re.compile(r"^\[([^,]+),([^)]+)\)$")


class LedgerMismatch(EhrReleaseError):
    """The ledger does not contain what Algorithm 1 must have charged: expected vs got."""

    def __init__(self, expected: str, got: str) -> None:
        self.expected, self.got = expected, got
        super().__init__(f"expected {expected}, got {got}")


# --------------------------------------------------------------------------- small helpers
def _bound_text(x: Fraction) -> str:
    """An interval bound as the format writes it: an integer without a decimal point, any
    other as the shortest decimal of its double."""
    return str(int(x)) if x.denominator == 1 else repr(float(x))


def _interval(label: str) -> tuple[Fraction, Fraction]:
    """``"[18,37)"`` → (18, 37), in its one spelling only: ``[18.0,37)`` or ``[018,37)``
    would be free bits in every interval label of the ledger, the cut and the groups."""
    m = _INTERVAL.match(label)
    if not m:
        raise LedgerMismatch("an interval label [lo,hi)", repr(label))
    lo, hi = Fraction(m.group(1)), Fraction(m.group(2))
    if label != f"[{_bound_text(lo)},{_bound_text(hi)})":
        raise LedgerMismatch("an interval label in its one spelling", "another spelling")
    return lo, hi


def _splittable(lo: Fraction, hi: Fraction, integer: bool) -> bool:
    return hi - lo >= 2 if integer else hi > lo


def _log2_upper(n_classes: int) -> Fraction:
    """Δu of InfoGain, log2 |classes|, as the format writes it: exact for a power of two,
    else the double two steps above ``math.log2`` (a bound above the true logarithm whatever
    the last bit ``log2`` rounds to). The one value the ledger may record."""
    if n_classes & (n_classes - 1) == 0:
        return Fraction(n_classes.bit_length() - 1)
    return Fraction(math.nextafter(math.nextafter(math.log2(n_classes), math.inf), math.inf))


def _is_cut(tree: Hierarchy, nodes: set[str]) -> bool:
    """Exactly one node of ``nodes`` on every root-to-leaf path."""
    if any(n not in tree for n in nodes):
        return False
    for leaf in tree.leaves_under(tree.root):
        path = [leaf, *tree.ancestors(leaf)]
        if sum(1 for n in path if n in nodes) != 1:
            return False
    return True


@dataclass
class Replay:
    """The cut per attribute as the ledger's specializations move it."""

    config: DiffGenConfig
    cut: dict[str, set[str]] = field(default_factory=dict)
    intervals: dict[str, set[tuple[Fraction, Fraction]]] = field(default_factory=dict)
    points: dict[tuple[str, Fraction, Fraction], Fraction] = field(default_factory=dict)
    #: The steps that spent nothing, as the ledger's ``events`` must list them.
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, tree in self.config.categorical.items():
            self.cut[name] = {tree.root}
        for name, tax in self.config.set_valued.items():
            self.cut[name] = {tax.tree.root}
        for name, dom in self.config.numerical.items():
            self.intervals[name] = {(Fraction(dom.lo), Fraction(dom.hi))}

    def kind(self, attr: str) -> str:
        if attr in self.config.categorical:
            return "categorical"
        if attr in self.config.numerical:
            return "numerical"
        if attr in self.config.set_valued:
            return "set-valued"
        raise LedgerMismatch("a configured attribute", repr(attr))

    def tree(self, attr: str) -> Hierarchy:
        if attr in self.config.categorical:
            return self.config.categorical[attr]
        return self.config.set_valued[attr].tree


# --------------------------------------------------------------------------- the replay
@dataclass
class Expectations:
    """What the verifier derived from the parameters alone."""

    epsilon: Fraction
    h: int
    eps1: Fraction
    du: Fraction
    policy: str
    #: The run's test-mode seed (None in production): it picks the sampler.
    seed: Any = None


def _check_scale(c: dict[str, Any], exp: Expectations) -> str | None:
    """None if the charge's noise pays at most its ε; else what is wrong."""
    eps = Fraction(c["epsilon"])
    scale = Fraction(c["scale"])
    sens = Fraction(c["sensitivity"])
    if scale <= 0:
        return f"charge {c['index']}: scale {c['scale']} is not positive"
    if c["mechanism"] == "laplace":
        if sens < 1:
            return f"charge {c['index']}: Laplace on counts needs Δ ≥ 1, got {sens}"
        loss = sens / scale  # the declared Δ is what neighbours may move the counts by
    elif c["mechanism"] == "exponential":
        if sens < exp.du:
            return f"charge {c['index']}: Δu ≥ {float(exp.du):.6g} expected, got {sens}"
        loss = 2 * sens / scale
    else:
        return f"charge {c['index']}: unknown mechanism {c['mechanism']!r}"
    if loss > eps:
        return (f"charge {c['index']}: noise scale {c['scale']} pays ε = {float(loss):.6g} "
                f"but charges {float(eps):.6g}")
    return None


def _expect(c: dict[str, Any], *, phase: str, mechanism: str, scope: str,
            epsilon: Fraction | None, step: int) -> None:
    got = (c.get("phase"), c.get("mechanism"), c.get("scope"), int(c.get("step", -1)))
    want = (phase, mechanism, scope, step)
    if got != want:
        raise LedgerMismatch(f"charge {c.get('index')} = {want}", f"{got}")
    if epsilon is not None and Fraction(c["epsilon"]) != epsilon:
        raise LedgerMismatch(f"charge {c['index']} ε = {epsilon}", str(c["epsilon"]))


def replay(ledger: dict[str, Any], exp: Expectations, replay_: Replay,
           n_groups: int) -> Fraction:
    """Walk the charges as Algorithm 1 must have made them; return the composed total."""
    charges = list(ledger["charges"])
    pos = 0
    scopes: dict[str, set[tuple[int, str]]] = {}
    for c in charges:
        if c.get("scope") == "parallel":
            scopes.setdefault(str(c.get("group")), set()).add((int(c["step"]), c["phase"]))
    shared = {g: sorted(s) for g, s in scopes.items() if len(s) > 1 or g == "None"}
    if shared:
        raise LedgerMismatch("each parallel group within one step and phase", str(shared))

    def take() -> dict[str, Any]:
        nonlocal pos
        if pos >= len(charges):
            raise LedgerMismatch("another charge", "end of ledger")
        pos += 1
        return charges[pos - 1]

    total = Fraction(0)
    # step 0: one split point per numerical attribute with a splittable domain
    for name, dom in replay_.config.numerical.items():
        lo, hi = Fraction(dom.lo), Fraction(dom.hi)
        if not _splittable(lo, hi, dom.integer):
            replay_.events.append({"step": 0, "event": "unsplittable domain: no split point "
                                   "drawn", "attribute": name})
            continue
        c = take()
        _expect(c, phase="initial-split", mechanism="exponential", scope="sequential",
                epsilon=exp.eps1, step=0)
        _record_point(c, name, lo, hi, replay_, dom.integer)
        total += exp.eps1
    steps = sorted({int(c["step"]) for c in charges[pos:] if c.get("phase") == "selection"})
    if steps != list(range(1, len(steps) + 1)) or len(steps) > exp.h:
        raise LedgerMismatch(f"selections at steps 1..k with k ≤ h = {exp.h}", str(steps))
    if len(steps) < exp.h and not any("stopped" in e.get("event", "")
                                      for e in ledger.get("events", [])):
        raise LedgerMismatch(f"{exp.h} selections or an early-stop event",
                             f"{len(steps)} selections")
    for step in steps:
        c = take()
        _expect(c, phase="selection", mechanism="exponential", scope="sequential",
                epsilon=exp.eps1, step=step)
        total += exp.eps1
        total += _specialization(c, step, take, exp, replay_)
    if len(steps) < exp.h:
        replay_.events.append({"step": len(steps) + 1, "event": "no candidate left: stopped "
                               "early", "skipped_steps": exp.h - len(steps)})
    final = take()
    expected_final = exp.epsilon - total if exp.policy == "final-counts" else exp.epsilon / 2
    _expect(final, phase="final-counts", mechanism="laplace", scope="parallel",
            epsilon=expected_final, step=exp.h + 1)
    if int(final["detail"].get("groups", -1)) != n_groups:
        raise LedgerMismatch(f"final counts over the {n_groups} released groups",
                             str(final["detail"].get("groups")))
    if pos != len(charges):
        raise LedgerMismatch("no charge after the final counts",
                             f"{len(charges) - pos} more")
    return total + Fraction(final["epsilon"])


def _point(raw: Any, integer: bool) -> Fraction:
    """A split point as the ledger must write it: a whole number as a JSON integer, any other
    as a decimal, and whole in an integer domain (where the mechanism only draws integers).
    Another spelling (``25.0`` for ``25``) or a fraction there would be free to carry bits."""
    if type(raw) not in (int, float):
        raise LedgerMismatch("a split point written as a JSON number", type(raw).__name__)
    value = Fraction(str(raw))
    if (type(raw) is int) != (value.denominator == 1):
        raise LedgerMismatch("a whole split point as an integer, any other as a decimal",
                             "another spelling")
    if integer and value.denominator != 1:
        raise LedgerMismatch("a whole split point in an integer domain", "a fraction")
    return value


def _record_point(c: dict[str, Any], name: str, lo: Fraction, hi: Fraction,
                  replay_: Replay, integer: bool) -> None:
    detail = c.get("detail", {})
    if detail.get("attribute") != name or _interval(detail.get("interval", "")) != (lo, hi):
        raise LedgerMismatch(f"a split of {name} on [{lo},{hi})",
                             f"{detail.get('attribute')} {detail.get('interval')}")
    point = _point(detail.get("point"), integer)
    if not lo < point < hi:
        raise LedgerMismatch(f"a split point strictly inside [{lo},{hi})", str(point))
    replay_.points[(name, lo, hi)] = point


def _specialization(sel: dict[str, Any], step: int, take, exp: Expectations,
                    replay_: Replay) -> Fraction:
    """Check the selected value and the follow-up charges of one step; return their cost."""
    d = sel.get("detail", {})
    attr = d.get("attribute")
    kind = replay_.kind(attr)
    if d.get("kind") != kind:
        raise LedgerMismatch(f"{attr} is {kind}", str(d.get("kind")))
    value = d.get("value")
    if kind == "numerical":
        lo, hi = _interval(value)
        if (lo, hi) not in replay_.intervals[attr]:
            raise LedgerMismatch(f"a current interval of {attr}", value)
        point = replay_.points.get((attr, lo, hi))
        if point is None:
            raise LedgerMismatch(f"a split point drawn earlier for {value}", "none")
        integer = replay_.config.numerical[attr].integer
        if _point(d.get("point"), integer) != point:  # restated: nothing new may stand here
            raise LedgerMismatch(f"the split point drawn earlier for {value}", "another")
        children = [(lo, point), (point, hi)]
        if [_interval(x) for x in d.get("children", [])] != children:
            raise LedgerMismatch(f"children {children}", str(d.get("children")))
        replay_.intervals[attr] -= {(lo, hi)}
        replay_.intervals[attr] |= set(children)
        dom = replay_.config.numerical[attr]
        spent = Fraction(0)
        group = None
        for a, b in children:  # disjoint by construction: [lo,p) and [p,hi)
            if not _splittable(a, b, dom.integer):
                continue
            c = take()
            _expect(c, phase="split", mechanism="exponential", scope="parallel",
                    epsilon=exp.eps1, step=step)
            if group is not None and c.get("group") != group:
                raise LedgerMismatch("both split points in one parallel group",
                                     f"{group!r} and {c.get('group')!r}")
            group = c.get("group")
            _record_point(c, attr, a, b, replay_, dom.integer)
            spent = exp.eps1
        if not spent:
            replay_.events.append({"step": step, "event": "new intervals cannot be split: "
                                   "no split point drawn"})
        return spent
    tree = replay_.tree(attr)
    if value not in replay_.cut[attr]:
        raise LedgerMismatch(f"a value of the current cut of {attr}", repr(value))
    children = sorted(tree.children.get(value, []))
    if not children or d.get("children") != children:  # in name order: no free permutation
        raise LedgerMismatch(f"the taxonomy children of {value} {children}",
                             str(d.get("children")))
    replay_.cut[attr] = (replay_.cut[attr] - {value}) | set(children)
    if kind == "categorical":
        replay_.events.append({"step": step,
                               "event": "categorical specialization: nothing measured"})
        return Fraction(0)
    c = take()
    _expect(c, phase="emptiness", mechanism="laplace", scope="parallel", epsilon=exp.eps1,
            step=step)
    test = c.get("detail", {})
    if test.get("node") != value:
        raise LedgerMismatch(f"emptiness tests of the children of {value}",
                             str(test.get("node")))
    # every non-empty combination of the children; the root's empty one too
    combinations = 2 ** len(children) - (0 if value == tree.root else 1)
    if test.get("combinations") != combinations:
        raise LedgerMismatch(f"{combinations} child combinations of {value}",
                             str(test.get("combinations")))
    return exp.eps1


def _round_up(exact: Fraction) -> float:
    """The smallest double ≥ ``exact``: the one scale that pays exactly the charged ε (a
    larger one would still be private, but its extra digits would be free to carry data)."""
    value = float(exact)
    return math.nextafter(value, math.inf) if Fraction(value) < exact else value


def _detail_keys(c: dict[str, Any]) -> set[str]:
    """The fields a charge's ``detail`` holds: each one replayed or checked by the verifier.

    A field the replay cannot give -- a count of the candidates a selection chose from or of
    the partitions an emptiness test covered or kept, say: which exist depends on ones that a
    later noisy emptiness test may drop entirely, so the release does not determine it --
    would carry whatever its writer put there, so it must not be there at all.
    """
    phase = c["phase"]
    if phase in ("initial-split", "split"):
        return {"attribute", "interval", "point"}
    if phase == "selection":
        numerical = c["detail"].get("kind") == "numerical"
        return {"attribute", "kind", "value", "children"} | ({"point"} if numerical else set())
    if phase == "emptiness":
        return {"node", "combinations", "threshold"}
    return {"groups", "policy"}


def _bookkeeping(ledger: dict[str, Any], exp: Expectations, replay_: Replay,
                 n_classes: int) -> list[str]:
    """Where the ledger's texts and bookkeeping numbers depart from what the replay gives.

    ``touched``, the parallel ``group`` names, the events, ``index``, ``epsilon_float``,
    ``sensitivity``, ``scale``, ``spent_float``, an emptiness test's threshold and the final
    counts' policy are fixed by the parameters, the public taxonomies and the DP choices the
    replay walked; left unchecked, each would publish whatever the writer put there (a true
    count, say). Only what the replay has already accepted is read here (run after
    :func:`replay`)."""
    problems: list[str] = []
    threshold = math.sqrt(2) / float(exp.eps1)
    groups = {"split": "step {step}: split points", "emptiness": "step {step}: emptiness tests",
              "final-counts": "final counts"}
    for position, c in enumerate(ledger["charges"]):
        d, phase = c["detail"], c["phase"]
        if phase in ("initial-split", "split"):
            touched = f"records with {d['attribute']} in {d['interval']}"
        elif phase == "selection":
            touched = "all live records (scores of every candidate)"
        elif phase == "emptiness":
            touched = (f"records of every partition holding {d['node']}, "
                       f"{d['combinations']} disjoint child combinations each")
        else:
            touched = (f"all live records in {d['groups']} disjoint groups "
                       f"({d['groups'] // n_classes} partitions × {n_classes} classes)")
        group = groups[phase].format(step=c["step"]) if c["scope"] == "parallel" else None
        factor = 2 if c["mechanism"] == "exponential" else 1
        # Δ of a count (add/remove) or Δu of the score: a larger one stays private (the
        # scale follows it), but which one would be the writer's free choice.
        sensitivity = Fraction(1) if c["mechanism"] == "laplace" else exp.du
        if Fraction(c["sensitivity"]) != sensitivity:
            problems.append(f"charge {position}: sensitivity is not the parameters'")
        wanted = {"index": position, "epsilon_float": float(Fraction(c["epsilon"])),
                  "touched": touched, "group": group,
                  "scale": _round_up(factor * Fraction(c["sensitivity"]) /
                                     Fraction(c["epsilon"]))}
        problems += [f"charge {position}: {key} is not the replay's" for key, want in
                     wanted.items() if c.get(key) != want or type(c.get(key)) is not type(want)]
        if set(d) != _detail_keys(c):
            problems.append(f"charge {position}: detail holds fields the replay does not give")
        if phase == "emptiness" and d.get("threshold") != threshold:
            problems.append(f"charge {position}: threshold is not √2/ε'")
        if phase == "final-counts" and (d.get("policy") != exp.policy
                                        or d["groups"] % n_classes):
            problems.append(f"charge {position}: not the final counts of whole partitions "
                            "under the run's policy")
    if ledger.get("events") != replay_.events:
        problems.append("events are not the steps that spent nothing, as the replay finds")
    spent = ledger.get("spent_float")
    if type(spent) is not float or spent != float(_composition(ledger)):
        problems.append("spent_float is not the composed total")
    return problems


#: The format's cut-set label syntax (``cut.json`` restates it; nothing else may stand there).
SEPARATOR, EMPTY = ";", "(none)"


NEIGHBOURING = "add/remove one record"


COUNT = "count"


#: The sampler a run used: OpenDP unless the (test-mode only) ``seed`` parameter was given.
NOISE, SEEDED_NOISE = "opendp", "seeded-numpy (test mode)"


def _same(got: Any, want: Any) -> bool:
    """Equal as JSON, types included (``1`` is not ``1.0``, ``"2/44"`` is not ``"1/22"``)."""
    return json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def _description(cut_doc: dict[str, Any], ledger: dict[str, Any], config: DiffGenConfig,
                 exp: Expectations, score: str) -> list[str]:
    """Where cut.json or the ledger's header depart from the parameters and the public
    configuration they restate, or spell a number another way.

    Each of these fields is data-independent by design, and a verifier that only compares
    their values (``Fraction("2/44") == Fraction("1/22")``) or skips them leaves them free
    to carry anything: a configuration name, a taxonomy root, an interval's last digits.
    """
    wanted: list[tuple[str, Any, Any]] = [
        ("cut.json configuration", cut_doc.get("configuration"), config.source),
        ("cut.json parameters", cut_doc.get("parameters"),
         {"epsilon": str(exp.epsilon), "h": exp.h, "score": score,
          "unused_budget": exp.policy}),
        ("cut.json epsilon_prime", cut_doc.get("epsilon_prime"), str(exp.eps1)),
        ("cut.json class", cut_doc.get("class"),
         {"column": config.class_column, "values": list(config.class_values)}),
        ("cut.json count_column", cut_doc.get("count_column"), COUNT),
        ("ledger neighbouring", ledger.get("neighbouring"), NEIGHBOURING),
        ("ledger noise", ledger.get("noise"), NOISE if exp.seed is None else SEEDED_NOISE),
        ("ledger epsilon", ledger.get("epsilon"), str(exp.epsilon)),
        ("ledger total_budget", ledger.get("total_budget"), str(exp.epsilon)),
        ("ledger h", ledger.get("h"), exp.h),
        ("ledger numerical_predictors", ledger.get("numerical_predictors"),
         len(config.numerical)),
        ("ledger epsilon_prime", ledger.get("epsilon_prime"), str(exp.eps1)),
        ("ledger unused_budget", ledger.get("unused_budget"), exp.policy),
        ("ledger spent", ledger.get("spent"), str(Fraction(str(ledger.get("spent"))))),
    ]
    for c in ledger.get("charges", []):
        for key in ("epsilon", "sensitivity"):
            wanted.append((f"charge {c.get('index')} {key}", c.get(key),
                           str(Fraction(str(c.get(key))))))
    for a in cut_doc.get("attributes", []):
        name, kind = a.get("name"), a.get("kind")
        if kind in ("categorical", "set-valued") and name in config.predictors:
            # in name order, as the numerical cut in interval order: no free permutation
            wanted.append((f"{name} cut order", a.get("cut"), sorted(a.get("cut", []))))
        if kind == "categorical" and name in config.categorical:
            wanted.append((f"{name} taxonomy_root", a.get("taxonomy_root"),
                           config.categorical[name].root))
        elif kind == "set-valued" and name in config.set_valued:
            tax = config.set_valued[name]
            wanted += [(f"{name} taxonomy", a.get("taxonomy"), tax.as_dict()),
                       (f"{name} taxonomy_root", a.get("taxonomy_root"), tax.tree.root),
                       (f"{name} separator", a.get("separator"), SEPARATOR),
                       (f"{name} empty", a.get("empty"), EMPTY)]
        elif kind == "numerical" and name in config.numerical:
            bounds = [_interval(label) for label in a.get("cut", [])]
            wanted += [(f"{name} cut order", a.get("cut"),
                        sorted(a.get("cut", []), key=_interval)),
                       (f"{name} domain", a.get("domain"), config.numerical[name].as_dict()),
                       (f"{name} intervals", a.get("intervals"),
                        [[float(lo), float(hi)] for lo, hi in bounds])]
        else:
            wanted.append((f"attribute {name}", kind, "a configured predictor of that kind"))
    return [f"{what} is not the one the parameters and configuration give"
            for what, got, want in wanted if not _same(got, want)]


# --------------------------------------------------------------------------- checks
def _composition(ledger: dict[str, Any]) -> Fraction:
    """Sequential sum + per parallel group max, straight from the charges."""
    seq = Fraction(0)
    groups: dict[str, Fraction] = {}
    for c in ledger["charges"]:
        eps = Fraction(c["epsilon"])
        if c["scope"] == "parallel" and c.get("group"):
            groups[c["group"]] = max(groups.get(c["group"], Fraction(0)), eps)
        else:
            seq += eps
    return seq + sum(groups.values(), Fraction(0))
