"""One module per widget (tables, meters, timeline, firing and frame views...)."""
