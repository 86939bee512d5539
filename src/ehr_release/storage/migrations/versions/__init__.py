"""One module per schema revision, applied in order by :mod:`ehr_release.storage.migrate`."""
