"""Move the loose modules of ``src/ehr_release/`` into packages named for their job (issue 36).

Re-runnable: it works from a module-name mapping, never from fixed lines, so it applies to a
tree other branches have changed meanwhile, and a second run changes nothing. For every
mapped module still at the package root it runs ``git mv`` (creating the package with its
``__init__.py`` docstring when missing), then rewrites every reference in ``src/``,
``tests/``, ``bench/``, ``scripts/``, ``docs/``, ``examples/``, ``prefect.yaml``,
``pyproject.toml``, ``README.md`` and ``Makefile``:

* dotted names anywhere — ``from ehr_release.x import``, ``import ehr_release.x``,
  monkeypatch targets such as ``"ehr_release.x.render"``, ``:mod:`` references, entry
  points;
* ``from ehr_release import x, y as z`` — split into one import per package;
* source paths such as ``src/ehr_release/x.py``.

Only ``governance`` is both an old module and a new package: its references are rewritten
while ``governance.py`` still sits at the root (every other rename is unambiguous and is
rewritten on every run, which catches references merged in later). Afterwards it sorts the
imports it touched (``ruff --select I``) and rewraps the docstring and comment lines the
longer names pushed over 100 characters; any other long line is listed for a hand.

    python scripts/restructure_root.py [--dry-run]
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "ehr_release"
LINE_LENGTH = 100
THIS = Path(__file__).resolve()

#: old root module → its new home (dotted, under ``ehr_release``).
MAPPING: dict[str, str] = {
    # the request and its plan
    "request": "planning.request",
    "plan": "planning.plan",
    "intake": "planning.intake",
    # declared parameters and what a run's parameters carry (below the registry, which
    # parses them, and storage, which reads the seed's declaration)
    "params": "parameters.params",
    "prepared": "parameters.prepared",
    "comparators": "parameters.comparators",
    # the documents a release carries
    "certificate": "documents.certificate",
    "datasheet": "documents.datasheet",
    "rendering": "documents.rendering",
    "plain": "documents.plain",
    "formats_doc": "documents.formats_doc",
    # a release's files: parked bundle, read back, verified
    "bundle": "release.bundle",
    "verification": "release.verification",
    # governance: who decides, what may be published, the trail kept honest
    "governance": "governance.identity",
    "integrity": "governance.integrity",
    "pseudonyms": "governance.pseudonyms",
    "publishable": "governance.publishable",
    # storage: where things are kept (keys and destinations sit below the tables that use
    # them, so storage imports nothing above it)
    "site_keys": "storage.site_keys",
    "destinations": "storage.destinations",
    # comparison of candidate releases
    "compare": "comparison.compare",
    "comparison_file": "comparison.comparison_file",
    "comparison_report": "comparison.comparison_report",
    # the data model every stage shares: the dataset, code hierarchies, the map contract,
    # and the reports' shapes (the verifiers and evaluations fill them)
    "dataset": "model.dataset",
    "hierarchy": "model.hierarchy",
    "mapping": "model.mapping",
    "reports": "model.reports",
    # generated patients
    "sample": "samples.sample",
    "synthetic": "samples.synthetic",
    "sample_layouts": "samples.sample_layouts",
    # a release's files read back from disk as the verifier sees them
    "release_files": "privacy.release_files",
    # charts: the evaluations draw them, the documents and the comparison show them
    "plotting": "utility.plotting",
    # the small shared foundations
    "errors": "core.errors",
    "canonical": "core.canonical",
    "files": "core.files",
    "randomness": "core.randomness",
    # where work runs
    "cpus": "runtime.cpus",
    "workers": "runtime.workers",
    "warm_up": "registry.warm_up",
    # the command line's progress display
    "progress": "cli_support.progress",
}

#: Docstrings of the packages the script creates.
PACKAGES: dict[str, str] = {
    "planning": "A release request and its plan: the request as given, the intake that reads "
                "its input\nand opens the run, and the plan every task is handed.",
    "parameters": "Declared parameters and what they carry: constraints that word their own "
                  "message,\nthe inputs a run's parameters name loaded once, and a "
                  "comparison's store of\ncomparator releases.",
    "documents": "The documents a release carries: the internal certificate, the recipient's "
                 "datasheet,\ntheir rendering and plain words, and the format "
                 "documentation.",
    "release": "A release on its way out: the bundle parked for the reviewer and its "
               "verification\nwherever it happens.",
    "governance": "Governance: the identity behind a decision, what is worth publishing, "
                  "release\npseudonyms and the audit's integrity check.",
    "comparison": "Comparing candidate releases of one dataset: the grid and ranking, the "
                  "written\ncomparison file and its report.",
    "model": "The data model every stage shares: the one ``Dataset`` every reader gives, code\n"
             "hierarchies, the map-function contract and the shapes of the verify and evaluate "
             "reports.",
    "samples": "Generated patients for demos, tests and benchmarks, in every input layout.",
    "core": "The small foundations every layer uses: typed errors, canonical JSON, durable "
            "files and\nthe one source of randomness.",
    "runtime": "Where work runs: the CPUs this process may use and GenDiag's workers.",
    "cli_support": "Helpers of the command line that are not commands.",
}

SCANNED_DIRS = ("src", "tests", "bench", "scripts", "docs", "examples")
SCANNED_FILES = ("prefect.yaml", "pyproject.toml", "README.md", "Makefile")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".cfg", ".ini", ".txt", ".j2",
            ".html", ""}


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def _path(dotted: str) -> Path:
    return PKG.joinpath(*dotted.split(".")).with_suffix(".py")


def move_modules(dry_run: bool) -> list[str]:
    """``git mv`` every mapped module still at the root; the old names moved now."""
    moved = []
    for old, new in MAPPING.items():
        src, dst = PKG / f"{old}.py", _path(new)
        if not src.exists():
            continue
        if dst.exists():
            raise SystemExit(f"both {src.relative_to(ROOT)} and {dst.relative_to(ROOT)} "
                             "exist: merge them by hand, then run again")
        moved.append(old)
        if dry_run:
            print(f"would move {src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
            continue
        package = dst.parent
        package.mkdir(parents=True, exist_ok=True)
        init = package / "__init__.py"
        if not init.exists():
            doc = PACKAGES.get(package.name, package.name.replace("_", " ").capitalize() + ".")
            init.write_text(f'"""{doc}\n"""\n', encoding="utf-8")
            git("add", str(init.relative_to(ROOT)))
        git("mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))
    return moved


def scanned_files() -> list[Path]:
    out = [ROOT / name for name in SCANNED_FILES if (ROOT / name).is_file()]
    for folder in SCANNED_DIRS:
        base = ROOT / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if (path.is_file() and path.suffix in SUFFIXES and path.resolve() != THIS
                    and "__pycache__" not in path.parts and ".venv" not in path.parts):
                out.append(path)
    return out


def ambiguous(old: str) -> bool:
    """Whether the old module's name is also a new package's (``governance``)."""
    return any(new.split(".")[0] == old for new in MAPPING.values())


def active_rules(pending: set[str]) -> dict[str, str]:
    return {old: new for old, new in MAPPING.items() if not ambiguous(old) or old in pending}


_FROM_PKG = re.compile(
    r"^(?P<indent>[ \t]*)from ehr_release import (?P<names>\([^)]*\)|[^\n#]*?)"
    r"(?P<comment>[ \t]*#[^\n]*)?$", re.MULTILINE)


def _split_from_package(text: str, rules: dict[str, str]) -> str:
    """``from ehr_release import a, b as c`` with moved names → one import per package."""

    def replace(match: re.Match[str]) -> str:
        names = [n.strip() for n in match["names"].strip("()").replace("\n", " ").split(",")]
        names = [n for n in names if n]
        parsed = [(n.split(" as ")[0].strip(), n.split(" as ")[1].strip() if " as " in n
                   else None) for n in names]
        if not any(name in rules for name, _ in parsed):
            return match[0]
        indent, comment = match["indent"], match["comment"] or ""
        kept = [n if alias is None else f"{n} as {alias}" for n, alias in parsed
                if n not in rules]
        lines = [f"{indent}from ehr_release import {', '.join(kept)}"] if kept else []
        for name, alias in parsed:
            if name not in rules:
                continue
            package, _, module = ("ehr_release." + rules[name]).rpartition(".")
            bound = alias or name
            lines.append(f"{indent}from {package} import {module}"
                         + (f" as {bound}" if bound != module else ""))
        lines[0] += comment
        return "\n".join(lines)

    return _FROM_PKG.sub(replace, text)


def rewrite(text: str, rules: dict[str, str]) -> str:
    text = _split_from_package(text, rules)
    for old in sorted(rules, key=len, reverse=True):
        new = rules[old]
        guard = ""
        if ambiguous(old):  # never touch names already inside the new package
            guard = r"(?!\.(?:" + "|".join(
                re.escape(n.split(".")[1]) for n in MAPPING.values()
                if n.startswith(old + ".")) + r")\b)"
        # Not in a bytes literal nor a versioned tag (b"ehr_release.dataset.v1" is a hash's
        # domain: renaming it would change every fingerprint).
        text = re.sub(rf"(?<![\w.])(?<!b\")(?<!b')ehr_release\.{old}(?!\w)(?!\.v\d){guard}",
                      f"ehr_release.{new}", text)
        text = re.sub(rf"ehr_release/{old}\.py\b", f"ehr_release/{new.replace('.', '/')}.py",
                      text)
    return text


def _string_and_comment_lines(source: str) -> tuple[set[int], set[int]]:
    """Line numbers inside triple-quoted strings (not their first line) and comment lines."""
    inside, comments = set(), set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.STRING and tok.string.lstrip("rbuRBUfF")[:3] in ('"""', "'''"):
                inside |= set(range(tok.start[0] + 1, tok.end[0] + 1))
            elif tok.type == tokenize.COMMENT and tok.line.strip().startswith("#"):
                comments.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside, comments


def rewrap(path: Path) -> list[str]:
    """Rewrap docstring and comment lines over the limit; the other long lines, listed."""
    source = path.read_text(encoding="utf-8")
    inside, comments = _string_and_comment_lines(source)
    out, left = [], []
    for number, line in enumerate(source.split("\n"), start=1):
        if len(line) <= LINE_LENGTH or "ehr_release" not in line:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        if number in comments:
            body = line.strip()[1:].strip()
            out += textwrap.wrap(body, LINE_LENGTH, initial_indent=indent + "# ",
                                 subsequent_indent=indent + "# ", break_long_words=False,
                                 break_on_hyphens=False)
        elif number in inside and not line.rstrip().endswith(('"""', "'''")):
            out += textwrap.wrap(line.strip(), LINE_LENGTH, initial_indent=indent,
                                 subsequent_indent=indent, break_long_words=False,
                                 break_on_hyphens=False)
        else:
            out.append(line)
            left.append(f"{path.relative_to(ROOT)}:{number}")
    path.write_text("\n".join(out), encoding="utf-8")
    return left


def sort_imports(paths: list[Path]) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not paths:
        return
    if not Path(ruff).exists():
        print("ruff not found: imports left unsorted (run ruff check --fix --select I)")
        return
    subprocess.run([ruff, "check", "--fix", "--select", "I", "--quiet",
                    *map(str, paths)], cwd=ROOT, check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="say what would change")
    opts = ap.parse_args()
    pending = {old for old in MAPPING if (PKG / f"{old}.py").exists()}
    rules = active_rules(pending)
    moved = move_modules(opts.dry_run)
    changed = []
    for path in scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text, rules)
        if new != text:
            changed.append(path)
            if not opts.dry_run:
                path.write_text(new, encoding="utf-8")
    print(f"moved {len(moved)} modules, rewrote {len(changed)} files")
    if opts.dry_run:
        for path in changed:
            print(f"would rewrite {path.relative_to(ROOT)}")
        return
    python = [p for p in changed if p.suffix == ".py"]
    sort_imports(python)
    left = [spot for p in python for spot in rewrap(p)]
    for spot in left:
        print(f"line over {LINE_LENGTH} characters, fix by hand: {spot}")


if __name__ == "__main__":
    main()
