"""Measuring a filter: cross-validation, the field's metrics, tuning the cost
ratio, and plots.
"""
