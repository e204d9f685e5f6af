"""The run stamp as the hot statements write it themselves (see `_runs`): a leaf, so that the SQL
modules can use it without importing `_runs` (which imports `views`)."""

# In an UPDATE of entries that changes their state: the run in hand, or the entry's own when none.
STAMP_SET = "run_id = coalesce(capture_run_in_hand(), run_id)"
