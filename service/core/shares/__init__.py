"""Share groups: queues over the log with a delivery state per record (Kafka's KIP-932 model)."""
