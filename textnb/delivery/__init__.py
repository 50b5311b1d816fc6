"""The mail path: verdict headers on a message passed through byte for byte, the
resident scorer and its thin client, per-user models, the milter, and the
scorer's monitoring.
"""
