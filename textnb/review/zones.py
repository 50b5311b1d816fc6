"""The time zone the review page shows times in: one named, or the host's own."""

from __future__ import annotations

import os
from datetime import timezone

__all__ = ["local_zone", "named_zone"]


def named_zone(name: str):
    """The tz database's zone ``name`` (Europe/Berlin, UTC); ValueError naming it when
    there is none."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is no time zone of the tz database (e.g. Europe/Berlin, "
                         "UTC; the system's zones are in /usr/share/zoneinfo)") from None


def local_zone():
    """The host's zone: $TZ when it names one, else /etc/localtime, else UTC."""
    from zoneinfo import ZoneInfo

    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return named_zone(name)
        except ValueError:
            pass
    try:
        with open("/etc/localtime", "rb") as found:
            return ZoneInfo.from_file(found, key="localtime")
    except (OSError, ValueError):
        return timezone.utc
