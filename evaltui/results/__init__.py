"""Results of finished runs, read offline: run rows, paired comparison, paper tables.

Nothing here imports Textual, FastAPI or rich; the commands render what it computes.
"""
