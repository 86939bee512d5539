"""Reading EHR extracts from files into the one :class:`~ehr_release.model.dataset.Dataset` model.

``read_dataset`` is imported on first use: the CLI's preflight
(:mod:`ehr_release.ingest.preflight`) lives in this package and must not load pandas.
"""

from typing import Any

__all__ = ["read_dataset"]


def __getattr__(name: str) -> Any:
    if name == "read_dataset":
        from ehr_release.ingest.readers import read_dataset

        return read_dataset
    raise AttributeError(name)
