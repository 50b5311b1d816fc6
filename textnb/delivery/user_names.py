"""User names: which names may pick a model, and the one form each picks it by.

Both the scorer (``textnb.delivery.server``: ``--user-from-peer``, a request's ``user=``)
and the models folder (``textnb.delivery.users``) use these, so they live apart from both.
"""

from __future__ import annotations

import re

from ..errors import TextnbError

__all__ = ["UserNameError", "check_user", "is_user_name", "user_key"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


class UserNameError(TextnbError):
    """A user name that could leave the models folder or is not a plain name."""


def is_user_name(name: str) -> bool:
    """Whether ``name`` is a name :func:`check_user` accepts."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_user(name: str) -> str:
    """``name`` if it is a safe user name; UserNameError naming the rule otherwise."""
    if not is_user_name(name):
        raise UserNameError(f"user name {name!r} is not allowed; use 1-64 letters, digits and "
                            ". _ @ + -, starting with a letter or digit")
    return name


def user_key(name: str) -> str:
    """The form of a user name that picks its model: ``name`` checked by :func:`check_user`,
    then lower-cased; UserNameError when it is not plain.

    Checked before it is folded: ``str.lower`` maps some letters that are not ASCII to
    ASCII ones (the Kelvin sign U+212A to ``k``), so folding first would give the
    recipient ``\u212aevin`` kevin's model instead of the shared one.
    """
    return check_user(name).lower()
