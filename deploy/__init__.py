"""How to run brokergate for real; ``deploy.local`` starts a whole cluster on this machine's loopback."""
