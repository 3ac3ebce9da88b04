"""Time windows in which balancing moves may start (pure logic).

A BalancingPolicy may restrict when its fixes start to a set of windows, each a cron
schedule that opens it, a duration it stays open and the time zone the schedule is read
in::

    windows:
      - schedule: "0 1 * * 1-5"     # 01:00 on weekdays...
        duration: 4h                # ...until 05:00
        timeZone: Europe/Berlin

A window opened at ``s`` is open for ``s <= now < s + duration``; the duration is elapsed
time (a window opened at 01:00 for 4h on the night the clocks go forward closes at 06:00
on the wall clock). Windows of one schedule or of several that overlap or touch merge into
one open period. With no windows at all balancing is never restricted.

Schedules are standard five-field cron expressions (minute, hour, day of month, month, day
of week; names such as ``mon`` and ``jan``; ``*``, ``,``, ``-`` and ``/``; a restricted day
of month and day of week match either, as in Vixie cron) or one of the macros ``@yearly``,
``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight`` and ``@hourly``, the
same language as a Kubernetes CronJob's ``spec.schedule``. They are evaluated by croniter
(https://github.com/pallets-eco/croniter), which also understands ``L`` (last day of the
month) and ``#`` (``fri#2``: the second Friday); its hashed (``H``) and random (``R``)
values and its six- and seven-field forms (seconds, years) are refused, as they are not
cron. The fields are read on the wall clock of an IANA time zone (:mod:`zoneinfo`, with the
``tzdata`` package where the system has no zone database), the way a CronJob's
``spec.timeZone`` is. Across daylight saving time changes croniter fires a start time the
clocks skip over at the first instant after the gap (``30 2 * * *`` at 03:00 on the night
the clocks go forward in Europe/Berlin) and a start time the clocks pass twice on both
passes (its windows then overlap and merge).

Durations are written as Kubernetes writes them (``metav1.Duration``, Go's
``time.ParseDuration``): a sequence of decimal numbers with a unit each, ``h``, ``m``,
``s``, ``ms``, ``us`` (or ``µs``), such as ``4h``, ``90m``, ``1h30m``, ``45s``, ``1.5h``;
:func:`parse_duration` reads them (the detectors' thresholds too) and
:func:`format_duration` writes them back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import (  # type: ignore[import-untyped]
    CroniterBadDateError,
    CroniterError,
    croniter,
)

#: The cron macros accepted besides five-field expressions (those of a Kubernetes CronJob).
CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)

#: How far past its start an open period is followed through overlapping windows; an
#: open period that goes on longer reports the end found so far (see :func:`window_state`).
MERGE_HORIZON = timedelta(days=31)

#: Steps at most while merging one open period; a step asks each window for its latest
#: start, so an every-minute schedule open two minutes each time is followed for 400 minutes.
MERGE_STEPS = 400

_UNITS_US = {
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1_000,
    "us": 1,
    "µs": 1,  # U+00B5 MICRO SIGN
    "μs": 1,  # U+03BC GREEK SMALL LETTER MU
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([A-Za-zµμ]+)")
# A hashed (H, H/5, H(0-29)) or random (R) cron value; the names of months and days of the
# week never begin with either letter.
_HASH_OR_RANDOM = re.compile(r"(?:^|[,/-])[HhRr](?:$|[(/,-])")
# Any start after this reference; used to check that a schedule ever fires.
_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)


class WindowError(ValueError):
    """A window's schedule, duration or time zone is not valid.

    The message names the field (``schedule``, ``duration``, ``timeZone``, or the name the
    caller gave :func:`parse_duration`); :attr:`field` holds it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def parse_duration(text: str, *, field: str = "duration") -> timedelta:
    """Read a Kubernetes (Go) style duration: ``"4h"``, ``"90m"``, ``"1h30m"``, ``"1.5s"``.

    Args:
        text: Numbers with units ``h``, ``m``, ``s``, ``ms``, ``us``/``µs``, without spaces
            or sign; ``"0"`` alone is zero. Days are not a unit (write ``24h``), nor are
            nanoseconds (finer than a :class:`~datetime.timedelta`).
        field: The name given in error messages (a threshold's field, for instance).

    Returns:
        The duration (zero or positive), exact to the microsecond.

    Raises:
        WindowError: not such a duration, negative, finer than a microsecond, or too long
            for a :class:`~datetime.timedelta`.
    """
    if not isinstance(text, str) or not text:
        raise WindowError(field, f"expected a duration such as 1h30m, got {text!r}")
    if text == "0":
        return timedelta(0)
    if text[0] in "+-":
        raise WindowError(field, f"{text!r}: a duration has no sign")
    total = Decimal(0)
    position = 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        number, unit = match.groups()
        if unit not in _UNITS_US:
            hint = " (write 24h for a day)" if unit == "d" else ""
            raise WindowError(
                field, f"{text!r}: unknown unit {unit!r}, expected h, m, s, ms or us{hint}"
            )
        try:
            total += Decimal(number) * _UNITS_US[unit]
        except InvalidOperation as exc:  # pragma: no cover - the pattern admits numbers only
            raise WindowError(field, f"{text!r}: bad number {number!r}") from exc
        position = match.end()
    if position != len(text):
        raise WindowError(
            field, f"{text!r} is not a duration such as 1h30m (numbers with units h, m, s)"
        )
    if total != total.to_integral_value():
        raise WindowError(field, f"{text!r} is finer than a microsecond")
    try:
        return timedelta(microseconds=int(total))
    except OverflowError as exc:
        raise WindowError(field, f"{text!r} is too long") from exc


def format_duration(td: timedelta) -> str:
    """Write a duration as :func:`parse_duration` reads it: ``"1h30m"``, ``"10m"``, ``"45s"``.

    Zero parts are left out (``1h``, not ``1h0m0s``); a day is ``24h``; a fraction of a
    second is a decimal of the seconds (``1m1.5s``), or ``ms``/``us`` below one second
    (``500ms``); zero is ``0s``. ``parse_duration(format_duration(td)) == td``.

    Raises:
        ValueError: ``td`` is negative.
    """
    if td < timedelta(0):
        raise ValueError(f"a negative duration has no format: {td}")
    micros = td // timedelta(microseconds=1)
    if micros == 0:
        return "0s"
    if micros < 1_000_000:
        return f"{micros // 1000}ms" if micros % 1000 == 0 else f"{micros}us"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if fraction:
        text += f"{seconds}.{fraction:06d}".rstrip("0") + "s"
    elif seconds:
        text += f"{seconds}s"
    return text


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    """Return the :class:`~zoneinfo.ZoneInfo` named ``name``; raise :class:`WindowError`."""
    # "localtime" is a file of the system's zone database (the machine's own zone), not a name.
    if not isinstance(name, str) or not name or name != name.strip() or name == "localtime":
        raise WindowError("timeZone", f"{name!r} is not an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise WindowError(
            "timeZone", f"unknown time zone {name!r} (an IANA name such as Europe/Berlin)"
        ) from exc


def _check_schedule(schedule: str) -> None:
    """Raise :class:`WindowError` unless ``schedule`` is a five-field cron or a macro."""
    if not isinstance(schedule, str) or not schedule.strip():
        raise WindowError("schedule", f"expected a cron expression, got {schedule!r}")
    text = schedule.strip()
    if text.startswith("@"):
        if text.lower() not in CRON_MACROS:
            raise WindowError(
                "schedule", f"{schedule!r}: unknown macro, expected one of {sorted(CRON_MACROS)}"
            )
    else:
        fields = text.split()
        if len(fields) != 5:
            raise WindowError(
                "schedule",
                f"{schedule!r}: expected 5 fields (minute hour day-of-month month "
                f"day-of-week), got {len(fields)}",
            )
        for value in fields:
            if _HASH_OR_RANDOM.search(value):
                raise WindowError(
                    "schedule", f"{schedule!r}: hashed (H) and random (R) values are not cron"
                )
    try:
        croniter(text, _REFERENCE).get_next(datetime)
    except CroniterBadDateError as exc:
        raise WindowError("schedule", f"{schedule!r} never fires") from exc
    except (CroniterError, ValueError, TypeError, KeyError) as exc:
        raise WindowError(
            "schedule", f"{schedule!r} is not a valid cron expression: {exc}"
        ) from exc


@dataclass(frozen=True)
class Window:
    """One recurring window: opens at each time ``schedule`` fires, for ``duration``.

    Attributes:
        schedule: A five-field cron expression or a macro (see the module's description),
            read on the wall clock of ``time_zone``; e.g. ``"0 1 * * 1-5"``.
        duration: How long each window stays open after it starts (elapsed time, > 0); it
            may be longer than the time between two starts.
        time_zone: An IANA time zone name, e.g. ``"Europe/Berlin"``; ``"UTC"`` by default.

    Raises:
        WindowError: a bad schedule, a duration not above zero, or an unknown time zone.
    """

    schedule: str
    duration: timedelta
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        _check_schedule(self.schedule)
        if not isinstance(self.duration, timedelta) or self.duration <= timedelta(0):
            raise WindowError("duration", f"must be above zero, got {self.duration!r}")
        _zone(self.time_zone)

    @classmethod
    def parse(cls, schedule: str, duration: str, time_zone: str | None) -> Window:
        """Build a window from a policy's strings.

        Args:
            schedule: The cron expression (surrounding blanks are dropped).
            duration: A duration such as ``"4h"`` or ``"1h30m"`` (:func:`parse_duration`).
            time_zone: An IANA time zone name; ``None`` or empty means UTC.

        Raises:
            WindowError: any of the three is not valid; the message names the field.
        """
        text = schedule.strip() if isinstance(schedule, str) else schedule
        return cls(text, parse_duration(duration, field="duration"), time_zone or "UTC")

    def starts_around(self, at: datetime) -> tuple[datetime | None, datetime | None]:
        """Return the latest start at or before ``at`` and the earliest after it (UTC, aware).

        Either is ``None`` when croniter finds no such start within 50 years. ``at`` must
        be timezone-aware.
        """
        zone = _zone(self.time_zone)
        schedule = self.schedule.strip()
        # croniter's previous start is strictly before the time it starts from.
        it = croniter(schedule, (at + timedelta(microseconds=1)).astimezone(zone))
        try:
            latest: datetime | None = it.get_prev(datetime).astimezone(UTC)
            while latest is not None and latest > at:  # pragma: no cover - defensive
                latest = it.get_prev(datetime).astimezone(UTC)
        except CroniterBadDateError:
            latest = None
        # Step forward from there: the next start, and any start at or before `at` that
        # the backward search passed over.
        it = croniter(schedule, (latest or at).astimezone(zone))
        try:
            following: datetime | None = it.get_next(datetime).astimezone(UTC)
            while following is not None and following <= at:
                latest = following
                following = it.get_next(datetime).astimezone(UTC)
        except CroniterBadDateError:
            following = None
        return latest, following


@dataclass(frozen=True)
class WindowState:
    """Whether balancing moves may start now, and when that changes (UTC, aware).

    Attributes:
        open: A window is open now (always ``True`` without windows).
        closes_at: When the open period that holds now ends; ``None`` when closed (or
            without windows: never).
        next_open: The start of the next open period: after ``closes_at`` when open,
            after now when closed; ``None`` when there is none (or without windows).
        next_close: The end of the period that starts at ``next_open`` (a lower bound for
            a period followed no further, see :func:`window_state`).
    """

    open: bool
    closes_at: datetime | None
    next_open: datetime | None
    next_close: datetime | None


def _end_of_period(windows: Sequence[Window], at: datetime) -> tuple[datetime | None, bool]:
    """Find the end of the merged open period that holds ``at``.

    Returns:
        ``(end, complete)``: ``end`` is ``None`` when no window is open at ``at``;
        ``complete`` is ``False`` when the period went on past :data:`MERGE_HORIZON` or
        :data:`MERGE_STEPS`, ``end`` then being the farthest end found.
    """
    end: datetime | None = None
    t = at
    for _ in range(MERGE_STEPS):
        found = None
        for window in windows:
            start, _following = window.starts_around(t)
            if start is not None and start + window.duration > t:
                close = start + window.duration
                found = close if found is None else max(found, close)
        if found is None:
            return end, True
        end = t = found  # a window closes at `end`; is another open at that instant?
        if end - at > MERGE_HORIZON:
            return end, False
    return end, False


def window_state(windows: Sequence[Window], now: datetime) -> WindowState:
    """Whether ``windows`` let balancing moves start at ``now``, and the next changes.

    A window opened at ``s`` is open for ``s <= now < s + duration``. Windows that overlap
    or touch (one opening the instant another closes) form one open period: ``closes_at``
    is the first instant after ``now`` at which no window is open. An open period that goes
    on past :data:`MERGE_HORIZON` or :data:`MERGE_STEPS` (say an hourly schedule open for an
    hour each time) is followed no further: ``closes_at`` is then the farthest end found, a
    moment until which the windows are open at least, and ``next_open``/``next_close`` are
    ``None``; likewise ``next_close`` is such a lower bound when the next period is that
    long.

    Args:
        windows: The policy's windows; empty means no restriction (open, all else ``None``).
        now: The current time, timezone-aware.

    Returns:
        The state, its times in UTC.

    Raises:
        ValueError: ``now`` is naive.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    now = now.astimezone(UTC)
    if not windows:
        return WindowState(open=True, closes_at=None, next_open=None, next_close=None)
    closes_at, complete = _end_of_period(windows, now)
    if not complete:
        return WindowState(open=True, closes_at=closes_at, next_open=None, next_close=None)
    after = closes_at if closes_at is not None else now
    # The next opening after `after` (at `after` itself nothing is open).
    starts = [s for w in windows if (s := w.starts_around(after)[1]) is not None]
    next_open = min(starts) if starts else None
    next_close = _end_of_period(windows, next_open)[0] if next_open is not None else None
    return WindowState(
        open=closes_at is not None,
        closes_at=closes_at,
        next_open=next_open,
        next_close=next_close,
    )
