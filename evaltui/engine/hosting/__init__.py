"""Shared nodesets served to workers: hosts, the authenticated channel, the wire, batching."""
