"""Balancing windows: cron schedules, durations, time zones, merging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from kpo_operator.balancing.windows import (
    MERGE_HORIZON,
    Window,
    WindowError,
    WindowState,
    format_duration,
    parse_duration,
    window_state,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, us, tzinfo=UTC)


def berlin(y: int, mo: int, d: int, h: int = 0, mi: int = 0, *, fold: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, tzinfo=BERLIN, fold=fold)


# 2025-01-06 is a Monday.
WEEKNIGHTS = Window("0 1 * * 1-5", timedelta(hours=4))


# --- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4h", timedelta(hours=4)),
        ("90m", timedelta(minutes=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("45s", timedelta(seconds=45)),
        ("10m", timedelta(minutes=10)),
        ("2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
        ("1.5h", timedelta(minutes=90)),
        (".5m", timedelta(seconds=30)),
        ("1.s", timedelta(seconds=1)),
        ("250ms", timedelta(milliseconds=250)),
        ("7us", timedelta(microseconds=7)),
        ("7µs", timedelta(microseconds=7)),
        ("1m30m", timedelta(minutes=31)),  # Go adds repeated units up too
        ("48h", timedelta(days=2)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("0h0m", timedelta(0)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "expected a duration"),
        ("4", "is not a duration"),
        ("h", "is not a duration"),
        ("1h 30m", "is not a duration"),
        (" 1h", "is not a duration"),
        ("1h30", "is not a duration"),
        ("-1h", "no sign"),
        ("+1h", "no sign"),
        ("1d", "unknown unit 'd'"),
        ("1d", "24h"),
        ("5ns", "unknown unit 'ns'"),
        ("1H", "unknown unit 'H'"),
        ("1.2.3s", "is not a duration"),
        ("0.0000001s", "finer than a microsecond"),
        ("99999999999999999h", "too long"),
    ],
)
def test_parse_duration_refuses(text: str, fragment: str) -> None:
    with pytest.raises(WindowError, match=r"^duration: ") as info:
        parse_duration(text)
    assert fragment in str(info.value)
    assert info.value.field == "duration"


def test_parse_duration_names_the_callers_field() -> None:
    with pytest.raises(WindowError, match=r"^threshold: '10x'") as info:
        parse_duration("10x", field="threshold")
    assert info.value.field == "threshold"
    with pytest.raises(WindowError):
        parse_duration(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(minutes=10), "10m"),
        (timedelta(seconds=45), "45s"),
        (timedelta(hours=4), "4h"),
        (timedelta(hours=1, seconds=5), "1h5s"),
        (timedelta(days=2, minutes=1), "48h1m"),
        (timedelta(0), "0s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(microseconds=1500), "1500us"),
        (timedelta(minutes=1, milliseconds=1500), "1m1.5s"),
        (timedelta(seconds=1, microseconds=1), "1.000001s"),
    ],
)
def test_format_duration(td: timedelta, text: str) -> None:
    assert format_duration(td) == text
    assert parse_duration(text) == td


def test_format_duration_refuses_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(timedelta(seconds=-1))


@pytest.mark.parametrize("seconds", [1, 59, 60, 61, 3599, 3600, 3661, 86400, 90061, 123456])
def test_duration_round_trip(seconds: int) -> None:
    td = timedelta(seconds=seconds)
    assert parse_duration(format_duration(td)) == td


# --- windows: validation -----------------------------------------------------------------


def test_parse_builds_a_window() -> None:
    window = Window.parse(" 0 1 * * 1-5 ", "1h30m", "Europe/Berlin")
    assert window == Window("0 1 * * 1-5", timedelta(minutes=90), "Europe/Berlin")
    assert Window.parse("0 1 * * *", "4h", None).time_zone == "UTC"
    assert Window.parse("0 1 * * *", "4h", "").time_zone == "UTC"


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ("", "expected a cron expression"),
        ("   ", "expected a cron expression"),
        ("* * * *", "expected 5 fields"),
        ("0 0 * * * *", "got 6"),
        ("0 0 1 1 * 2030 5", "got 7"),
        ("0 25 * * *", "not a valid cron expression"),
        ("61 * * * *", "not a valid cron expression"),
        ("0 0 0 * *", "not a valid cron expression"),
        ("0 0 * 13 *", "not a valid cron expression"),
        ("0 0 * * 8", "not a valid cron expression"),
        ("*/0 * * * *", "not a valid cron expression"),
        ("a b c d e", "not a valid cron expression"),
        ("0 0 31 2 *", "never fires"),
        ("H * * * *", "hashed (H) and random (R)"),
        ("H(0-29)/10 * * * *", "hashed (H) and random (R)"),
        ("R 1 * * *", "hashed (H) and random (R)"),
        ("0 1,r * * *", "hashed (H) and random (R)"),
        ("@reboot", "unknown macro"),
        ("@every 5m", "unknown macro"),
        ("CRON_TZ=UTC 0 1 * * *", "expected 5 fields"),
    ],
)
def test_bad_schedules(schedule: str, fragment: str) -> None:
    with pytest.raises(WindowError, match=r"^schedule: ") as info:
        Window.parse(schedule, "1h", None)
    assert fragment in str(info.value)
    assert info.value.field == "schedule"


@pytest.mark.parametrize(
    "schedule",
    [
        "0 1 * * 1-5",
        "*/15 * * * *",
        "30 22 * * sat,sun",
        "0 0 1 jan,jul *",
        "0 3 * * 7",  # Sunday, as 0
        "0 0 L * *",  # croniter: last day of the month
        "0 2 * * fri#2",  # croniter: second Friday
        "0 0 29 2 *",  # fires every leap year
        "@daily",
        "@hourly",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@midnight",
    ],
)
def test_good_schedules(schedule: str) -> None:
    Window.parse(schedule, "1h", "UTC")


@pytest.mark.parametrize("zone", ["Mars/Olympus", "europe/berlin ", " UTC", "localtime", "/etc/x"])
def test_bad_time_zones(zone: str) -> None:
    with pytest.raises(WindowError, match=r"^timeZone: ") as info:
        Window.parse("0 1 * * *", "1h", zone)
    assert info.value.field == "timeZone"


@pytest.mark.parametrize("duration", ["0", "0s", "-1h", "1 h", ""])
def test_bad_window_durations(duration: str) -> None:
    with pytest.raises(WindowError, match=r"^duration: "):
        Window.parse("0 1 * * *", duration, None)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(WindowError, match=r"^duration: must be above zero"):
        Window("0 1 * * *", timedelta(0))
    with pytest.raises(WindowError, match=r"^schedule: "):
        Window("0 1 * *", timedelta(hours=1))
    with pytest.raises(WindowError, match=r"^timeZone: "):
        Window("0 1 * * *", timedelta(hours=1), "Nowhere/Land")
    with pytest.raises(WindowError, match=r"^timeZone: "):
        Window("0 1 * * *", timedelta(hours=1), None)  # type: ignore[arg-type]


def test_window_error_is_a_value_error() -> None:
    assert issubclass(WindowError, ValueError)


# --- window state --------------------------------------------------------------------------


def test_no_windows_means_always_open() -> None:
    assert window_state([], utc(2025, 1, 6, 12)) == WindowState(True, None, None, None)


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_state([WEEKNIGHTS], datetime(2025, 1, 6, 2))


def test_inside_a_window() -> None:
    state = window_state([WEEKNIGHTS], utc(2025, 1, 6, 2, 30))  # Monday 02:30
    assert state == WindowState(
        open=True,
        closes_at=utc(2025, 1, 6, 5),
        next_open=utc(2025, 1, 7, 1),
        next_close=utc(2025, 1, 7, 5),
    )


def test_start_is_inclusive_and_end_exclusive() -> None:
    at_start = window_state([WEEKNIGHTS], utc(2025, 1, 6, 1))
    assert at_start.open
    assert at_start.closes_at == utc(2025, 1, 6, 5)
    just_before = window_state([WEEKNIGHTS], utc(2025, 1, 6, 0, 59, 59, 999999))
    assert not just_before.open
    assert just_before.next_open == utc(2025, 1, 6, 1)
    at_end = window_state([WEEKNIGHTS], utc(2025, 1, 6, 5))
    assert not at_end.open
    assert at_end.closes_at is None
    assert at_end.next_open == utc(2025, 1, 7, 1)
    assert at_end.next_close == utc(2025, 1, 7, 5)
    last_instant = window_state([WEEKNIGHTS], utc(2025, 1, 6, 4, 59, 59, 999999))
    assert last_instant.open


def test_closed_over_the_weekend() -> None:
    state = window_state([WEEKNIGHTS], utc(2025, 1, 10, 12))  # Friday noon
    assert state == WindowState(
        open=False,
        closes_at=None,
        next_open=utc(2025, 1, 13, 1),  # Monday
        next_close=utc(2025, 1, 13, 5),
    )


def test_now_in_another_zone_is_the_same_instant() -> None:
    now = datetime(2025, 1, 6, 8, 30, tzinfo=timezone(timedelta(hours=6)))  # 02:30 UTC
    state = window_state([WEEKNIGHTS], now)
    assert state.open
    assert state.closes_at == utc(2025, 1, 6, 5)
    assert state.closes_at is not None
    assert state.closes_at.tzinfo is UTC


def test_window_spanning_midnight() -> None:
    nightly = Window("0 22 * * *", timedelta(hours=4))  # 22:00 - 02:00
    before_midnight = window_state([nightly], utc(2025, 1, 6, 23, 30))
    after_midnight = window_state([nightly], utc(2025, 1, 7, 1, 30))
    for state in (before_midnight, after_midnight):
        assert state.open
        assert state.closes_at == utc(2025, 1, 7, 2)
        assert state.next_open == utc(2025, 1, 7, 22)
        assert state.next_close == utc(2025, 1, 8, 2)
    closed = window_state([nightly], utc(2025, 1, 7, 2))
    assert not closed.open
    assert closed.next_open == utc(2025, 1, 7, 22)


def test_weekday_window_spanning_midnight_into_saturday() -> None:
    friday_night = Window("0 23 * * fri", timedelta(hours=3))
    state = window_state([friday_night], utc(2025, 1, 11, 1))  # Saturday 01:00
    assert state.open
    assert state.closes_at == utc(2025, 1, 11, 2)
    assert state.next_open == utc(2025, 1, 17, 23)


def test_schedule_read_in_its_time_zone() -> None:
    window = Window("0 1 * * 1-5", timedelta(hours=4), "Europe/Berlin")
    # Winter: 01:00 CET is 00:00 UTC.
    state = window_state([window], utc(2025, 1, 6, 0, 30))
    assert state.open
    assert state.closes_at == utc(2025, 1, 6, 4)
    # Summer: 01:00 CEST is 23:00 UTC the day before.
    state = window_state([window], utc(2025, 7, 6, 23, 30))  # Monday 01:30 CEST
    assert state.open
    assert state.closes_at == utc(2025, 7, 7, 3)
    assert state.next_open == utc(2025, 7, 7, 23)


def test_dst_spring_forward_duration_is_elapsed_time() -> None:
    # Europe/Berlin, the last Sunday of March: 02:00 CET jumps to 03:00 CEST.
    window = Window("0 1 * * *", timedelta(hours=4), "Europe/Berlin")
    state = window_state([window], berlin(2025, 3, 30, 4, 30))
    assert state.open
    assert state.closes_at == utc(2025, 3, 30, 4)  # 06:00 CEST on the wall clock
    assert state.closes_at is not None
    assert state.closes_at.astimezone(BERLIN).hour == 6
    assert state.next_open == utc(2025, 3, 30, 23)  # 01:00 CEST


def test_dst_spring_forward_start_in_the_gap_fires_after_it() -> None:
    # 02:30 does not exist that night in Berlin: croniter opens the window at 03:00 CEST.
    window = Window("30 2 * * *", timedelta(hours=1), "Europe/Berlin")
    state = window_state([window], berlin(2025, 3, 30, 0, 30))
    assert not state.open
    assert state.next_open == berlin(2025, 3, 30, 3).astimezone(UTC)
    assert state.next_close == utc(2025, 3, 30, 2)
    inside = window_state([window], berlin(2025, 3, 30, 3, 15))
    assert inside.open
    assert inside.closes_at == utc(2025, 3, 30, 2)
    # The next night is normal again.
    assert inside.next_open == berlin(2025, 3, 31, 2, 30).astimezone(UTC)


def test_dst_fall_back_repeated_start_merges() -> None:
    # The last Sunday of October: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice;
    # croniter fires on both and the two windows of 1h overlap into one.
    window = Window("30 2 * * *", timedelta(hours=1), "Europe/Berlin")
    first = berlin(2025, 10, 26, 2, 30, fold=0).astimezone(UTC)
    second = berlin(2025, 10, 26, 2, 30, fold=1).astimezone(UTC)
    assert (first, second) == (utc(2025, 10, 26, 0, 30), utc(2025, 10, 26, 1, 30))
    state = window_state([window], first + timedelta(minutes=5))
    assert state.open
    assert state.closes_at == second + timedelta(hours=1)
    assert state.next_open == berlin(2025, 10, 27, 2, 30).astimezone(UTC)


def test_dst_in_new_york() -> None:
    # America/New_York, first Sunday of November: 02:00 EDT goes back to 01:00 EST.
    window = Window("0 0 * * *", timedelta(hours=3), "America/New_York")
    state = window_state([window], datetime(2025, 11, 2, 0, 30, tzinfo=NEW_YORK))
    assert state.open
    # Three hours of elapsed time after 00:00 EDT (04:00 UTC) end at 02:00 EST.
    assert state.closes_at == utc(2025, 11, 2, 7)
    assert state.next_open == datetime(2025, 11, 3, 0, 0, tzinfo=NEW_YORK).astimezone(UTC)


def test_overlapping_windows_merge() -> None:
    early = Window("0 1 * * *", timedelta(hours=3))  # 01:00 - 04:00
    late = Window("0 2 * * *", timedelta(hours=4))  # 02:00 - 06:00
    state = window_state([early, late], utc(2025, 1, 6, 2, 30))
    assert state == WindowState(
        open=True,
        closes_at=utc(2025, 1, 6, 6),
        next_open=utc(2025, 1, 7, 1),
        next_close=utc(2025, 1, 7, 6),
    )
    # Open in the first only, the second opens before the first closes: one period.
    state = window_state([early, late], utc(2025, 1, 6, 1, 30))
    assert state.closes_at == utc(2025, 1, 6, 6)
    assert state.next_open == utc(2025, 1, 7, 1)
    # Closed: the next period is the merged one.
    state = window_state([late, early], utc(2025, 1, 6, 12))
    assert state == WindowState(False, None, utc(2025, 1, 7, 1), utc(2025, 1, 7, 6))


def test_touching_windows_merge() -> None:
    first = Window("0 1 * * *", timedelta(hours=1))  # 01:00 - 02:00
    second = Window("0 2 * * *", timedelta(hours=1))  # 02:00 - 03:00
    state = window_state([first, second], utc(2025, 1, 6, 1, 15))
    assert state.open
    assert state.closes_at == utc(2025, 1, 6, 3)
    assert window_state([first, second], utc(2025, 1, 6, 2)).open


def test_separate_windows_do_not_merge() -> None:
    night = Window("0 1 * * *", timedelta(hours=1))  # 01:00 - 02:00
    noon = Window("0 12 * * *", timedelta(hours=1))  # 12:00 - 13:00
    state = window_state([night, noon], utc(2025, 1, 6, 1, 30))
    assert state == WindowState(True, utc(2025, 1, 6, 2), utc(2025, 1, 6, 12), utc(2025, 1, 6, 13))
    state = window_state([night, noon], utc(2025, 1, 6, 5))
    assert state == WindowState(False, None, utc(2025, 1, 6, 12), utc(2025, 1, 6, 13))


def test_duration_longer_than_the_period() -> None:
    # Starts every 6 hours, open 8 hours each: always open once started.
    window = Window("0 */6 * * *", timedelta(hours=8))
    state = window_state([window], utc(2025, 1, 6, 7))
    assert state.open
    assert state.closes_at is not None
    assert state.closes_at > utc(2025, 1, 6, 7) + MERGE_HORIZON  # open at least that long
    assert state.next_open is None
    assert state.next_close is None


def test_duration_longer_than_the_period_with_a_gap() -> None:
    # Weekdays at 20:00 for 30 hours: Monday 20:00 to Sunday 02:00 in one piece.
    window = Window("0 20 * * 1-5", timedelta(hours=30))
    state = window_state([window], utc(2025, 1, 8, 12))  # Wednesday noon
    assert state == WindowState(
        open=True,
        closes_at=utc(2025, 1, 12, 2),
        next_open=utc(2025, 1, 13, 20),
        next_close=utc(2025, 1, 19, 2),
    )
    # Saturday: only Friday's window is still open.
    assert window_state([window], utc(2025, 1, 11, 23)).open
    assert not window_state([window], utc(2025, 1, 12, 2)).open


def test_an_earlier_start_still_open_counts() -> None:
    # Monthly on the 1st for 40 days: on the 5th of February, January's and February's
    # windows are both open; the later end wins.
    window = Window("0 0 1 * *", timedelta(days=40))
    state = window_state([window], utc(2025, 2, 5))
    assert state.open
    assert state.closes_at is not None
    assert state.closes_at >= utc(2025, 3, 13)


def test_yearly_window() -> None:
    window = Window("@yearly", timedelta(days=1))
    state = window_state([window], utc(2025, 6, 1))
    assert state == WindowState(False, None, utc(2026, 1, 1), utc(2026, 1, 2))


def test_leap_day_window_years_away() -> None:
    window = Window("0 0 29 2 *", timedelta(hours=2))
    state = window_state([window], utc(2025, 3, 1))
    assert state == WindowState(False, None, utc(2028, 2, 29), utc(2028, 2, 29, 2))
    assert window_state([window], utc(2028, 2, 29, 1)).open


def test_every_minute_window_reports_a_lower_bound() -> None:
    window = Window("* * * * *", timedelta(minutes=2))
    state = window_state([window], utc(2025, 1, 6, 12, 0, 30))
    assert state.open
    assert state.closes_at is not None
    assert state.closes_at > utc(2025, 1, 6, 12, 10)
    assert (state.next_open, state.next_close) == (None, None)


def test_returns_utc() -> None:
    window = Window("0 1 * * *", timedelta(hours=1), "Asia/Tokyo")
    state = window_state([window], datetime(2025, 1, 6, 12, tzinfo=ZoneInfo("Asia/Tokyo")))
    assert state.next_open == utc(2025, 1, 6, 16)  # 01:00 JST the next day
    assert state.next_open is not None
    assert state.next_open.utcoffset() == timedelta(0)


def test_starts_around() -> None:
    latest, following = WEEKNIGHTS.starts_around(utc(2025, 1, 6, 1))
    assert (latest, following) == (utc(2025, 1, 6, 1), utc(2025, 1, 7, 1))
    latest, following = WEEKNIGHTS.starts_around(utc(2025, 1, 11, 12))  # Saturday
    assert (latest, following) == (utc(2025, 1, 10, 1), utc(2025, 1, 13, 1))
