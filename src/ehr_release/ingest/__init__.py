"""Reading EHR extracts from files into the one :class:`~ehr_release.dataset.Dataset` model."""

from ehr_release.ingest.readers import read_dataset

__all__ = ["read_dataset"]
