"""How figures, times, sizes and audit payloads read on the dashboard (Jinja2 filters).

Why: ``'%.4g'`` turned a count of 10,000 records into "1e+04", and raw JSON payloads hid
what an audit event says. Reviewers and auditors read these pages, not programmers: counts
get thousands separators, reals four significant digits without exponents in the usual
range, timestamps a space and "UTC", and payloads one ``key: value`` line per field.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ehr_release.documents.plain import format_number

#: The one number formatter, shared with the certificate and the datasheet.
number = format_number


def when(stamp: str | None) -> str:
    """An ISO-8601 UTC timestamp as ``2026-11-25 12:25:24 UTC`` (seconds, no offset)."""
    if not stamp:
        return ""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    zone = " UTC" if moment.utcoffset() is not None and not moment.utcoffset() else ""
    return moment.strftime("%Y-%m-%d %H:%M:%S") + zone


def size(count: int | None) -> str:
    """A byte count as ``12.3 kB`` (decimal units, as file managers show them)."""
    if count is None:
        return ""
    amount = float(count)
    for unit in ("bytes", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{count:,} bytes" if unit == "bytes" else f"{amount:.1f} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


def short_hash(stored: str) -> str:
    """The distinctive start of an audit hash: ``v2:<key id>:<digest>`` shows its digest."""
    return stored.rsplit(":", 1)[-1][:12] + "…"


def payload_lines(payload_json: str) -> list[tuple[str, str]]:
    """An audit payload as ``(field, value)`` pairs, fields sorted, nested values as JSON.

    Payloads hold no patient value by design (identifiers, counts, reasons, hashes), so an
    auditor sees all of them; text that is not a JSON object is shown as one ``value`` line.
    """
    try:
        payload = json.loads(payload_json)
    except (TypeError, ValueError):
        return [("value", str(payload_json))]
    if not isinstance(payload, dict):
        return [("value", _plain(payload))]
    return [(str(key), _plain(payload[key])) for key in sorted(payload)]


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "—"
    if isinstance(value, bool | int | float):
        return number(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


FILTERS = {"num": number, "when": when, "size": size, "payload": payload_lines,
           "short_hash": short_hash}
