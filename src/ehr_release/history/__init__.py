"""A site's release history: which releases hold the same patients, and what binds the next.

Data leaves a site as a history, not as one release: an attacker holds every release of the
same patients. This package links extracts to each other by keyed per-patient hashes
(:mod:`.linkage`), keeps the sources and the site's history policy (:mod:`.policy`), judges a
new release against the earlier ones (:mod:`.checks`) and shows the history to people
(:mod:`.view`).
"""
