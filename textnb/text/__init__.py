"""Message -> tokens: the tokenizer (spaCy's, narrowed), the segmentation of scripts
written without spaces, and the token namespaces.
"""
