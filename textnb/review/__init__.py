"""The review page's parts: what the scorer decided, recorded (``store``, ``recorder``),
and ``textnb web`` (``accounts``, ``charts``, ``web``), which shows it and teaches
through the scorer. Nothing here is imported by ``textnb filter`` or by ``textnb
serve`` unless ``--record`` is given (tests/test_review_store.py checks it)."""
