"""textnb: a cost-aware naive Bayes spam filter."""

__version__ = "0.1.0"
