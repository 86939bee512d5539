"""What each utility measure means, in one place: its plain words, which way is better and
what good and bad look like.

The certificate's first page, its utility section and appendix, the comparison report's
charts and the dashboard's utility table all read the same :class:`Measure`, so a figure
is never printed without its scale ("ARE W3 0.78 — average relative error of queries on
two codes; 0 is exact, 1 is no better than publishing nothing") and shares print as
percentages everywhere.
"""

from ehr_release.documents.measures.registry import (
    Measure,
    describe,
    explain,
    key_measures,
    measure,
    shown_value,
)

__all__ = ["Measure", "describe", "explain", "key_measures", "measure", "shown_value"]
