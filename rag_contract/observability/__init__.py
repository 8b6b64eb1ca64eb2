"""What the service tells its operator: traces, metrics and an access log, none of which carries
what people asked unless the operator says so (``settings``)."""
