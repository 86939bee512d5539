"""Stage artifacts for the Prefect UI: one stable key per stage, so history is kept.

Artifacts must never carry patient identifiers: they show counts, parameters, hashes and
verdicts only.
"""

from __future__ import annotations

from prefect.artifacts import create_markdown_artifact


def stage_artifact(stage: str, run_id: str, markdown: str) -> None:
    create_markdown_artifact(key=f"ehr-{stage}", markdown=f"**Run** `{run_id}`\n\n{markdown}",
                             description=f"ehr_release {stage} stage")


def md_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    """A markdown table; pipes in cells are escaped so values cannot break the layout."""
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
