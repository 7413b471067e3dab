// A fixture for scripts/check_notes.py: every kind of problem the check must report.
// Note [Indexed]: defined once and indexed; fine.
// Note [Twice]: defined here ...
// Note [Twice]: ... and again here.
// Note [Unindexed]: defined, but missing from the index.
// Cites Note [Nowhere], which nothing defines, and Note [Indexed], which is fine.
