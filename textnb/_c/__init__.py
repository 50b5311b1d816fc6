"""The per-token loops of training and scoring, in C when built (``_speedups``), else
in Python. Private: callers import it; it imports none of them.
"""
