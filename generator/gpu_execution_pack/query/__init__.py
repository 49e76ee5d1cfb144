"""What the API and the report ask Prometheus: the client, time and parameter parsing, an execution's span and scope."""
