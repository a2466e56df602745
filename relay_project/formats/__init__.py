"""Date formats for every page, the admin's too: one way to write a time (2026-05-04 13:45:09,
in UTC), the way the relay's own pages and logs write it. Named by FORMAT_MODULE_PATH."""
