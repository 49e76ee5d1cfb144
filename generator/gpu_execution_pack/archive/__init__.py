"""The archive: ended executions' records in SQLite or PostgreSQL, kept past Prometheus' retention."""
