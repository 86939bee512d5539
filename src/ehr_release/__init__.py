"""ehr_release: governed release of patient data."""

__version__ = "0.1.0"
