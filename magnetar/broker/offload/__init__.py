"""Tiered storage's broker side: which ledgers to offload and when (policy), and the service that runs
admin-triggered and automatic offloads and keeps their status."""
