"""Storage: SQLite objects with resourceVersions, the event log, watch fan-out, list and select."""
