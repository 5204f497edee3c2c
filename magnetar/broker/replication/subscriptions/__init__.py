"""PIP-33 replicated subscriptions: snapshots of cluster positions as marker messages, and subscription
positions that follow a consumer from one cluster to another."""
