"""Review: what authors and CI look at before a prompt ships: :mod:`.inspect` (a row per
section), :mod:`.diff` (two manifests), :mod:`.gate` (token budgets), :mod:`.lock`
(prompt sources pinned by fingerprint), :mod:`.context_map` (the request block by block, as
data and as one HTML page) and :mod:`.schemas` (the committed JSON Schemas)."""
