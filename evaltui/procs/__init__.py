"""Processes: process groups and spawning a run.
"""
