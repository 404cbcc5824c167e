"""Who starts and who waits: the pure decision, what the machine has (probes), the machine's
reservation ledger, accounting against measured usage, calibration and the sampling behind it."""
