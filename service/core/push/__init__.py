"""Push subscriptions: records delivered to HTTP endpoints over share groups."""
