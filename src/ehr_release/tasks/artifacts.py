"""Stage artifacts for the Prefect UI: one stable key per stage, so history is kept.

Artifacts must never carry patient identifiers: they show counts, parameters, hashes and
verdicts only. Prefect's UI gives a markdown table the width of its pane and cuts off
what does not fit (issue 34 finding 6: the verification table lost its verdict column),
so tables stay narrow — a name and a figure or two — and long words go in a list below.
"""

from __future__ import annotations

from prefect.artifacts import create_markdown_artifact

#: Columns a table may have: beyond this the UI cuts the last ones off.
MAX_COLUMNS = 4


def stage_artifact(stage: str, run_id: str, markdown: str) -> None:
    create_markdown_artifact(key=f"ehr-{stage}", markdown=f"**Run** `{run_id}`\n\n{markdown}",
                             description=f"ehr_release {stage} stage")


def md_text(value: object) -> str:
    """Text for a markdown line or cell: pipes escaped, line breaks flattened, so a value
    cannot break the layout."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    """A narrow markdown table (at most :data:`MAX_COLUMNS` columns)."""
    if len(header) > MAX_COLUMNS:
        raise ValueError(f"an artifact table has at most {MAX_COLUMNS} columns, got "
                         f"{len(header)}: put long words in a list below it")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_text(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
