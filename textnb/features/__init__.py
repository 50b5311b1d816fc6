"""Tokens -> counts: the vocabulary and its packed token store, CSR document-term
matrices (SciPy's or bare arrays), and growing arrays.
"""
