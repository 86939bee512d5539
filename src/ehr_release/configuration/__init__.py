"""The data owner's public configuration, read and checked: ArtUC's released attributes,
hierarchies and utility constraints (:mod:`.constraints`), disassociation's utility policies
(:mod:`.policies`) and DiffGen's taxonomies (:mod:`.taxonomies`).

Nothing here depends on the data's values beyond checking that the configuration fits them;
anonymizers, verifiers and evaluations all read the owner's choices through this package.
"""
