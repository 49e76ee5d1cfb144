"""The per-execution metrics endpoint (GET /api/v2/external/execution/{execution_id}/metrics)."""
