"""The model file and its lifecycle: the store format, the journal of updates,
the writer's lock, retrain and forget, merge, prune, the text dump, and
the checks every reader applies.
"""
