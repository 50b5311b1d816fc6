"""Bytes -> message: every way mail comes in (files, mailboxes, mail folders, corpora),
and the parser that reads a message's headers, text parts and HTML.
"""
