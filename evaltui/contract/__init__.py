"""The models and enums every layer shares; imports nothing of evaltui outside itself.
"""
