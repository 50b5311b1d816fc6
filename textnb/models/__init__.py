"""Counts -> model: naive Bayes and its event-model registry, the numeric-feature
models, evidence selection and combining, the ledger of learned messages, and
training health.
"""
