"""Model -> decision: the cost ratio's threshold, and the calibration of log-odds
to P(spam).
"""
