"""A repeating timer for the controller's periodic tasks (Kafka's ``KafkaScheduler`` use).

The only periodic task is the auto leader rebalance check: Kafka schedules it 5 s after
failover, then every ``leader.imbalance.check.interval.seconds``. The task's action only
enqueues a controller event; it runs on the timer's own daemon thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_log = logging.getLogger(__name__)


class RepeatingTask:
    """Calls ``action`` after ``initial_delay_s``, then every ``interval_s``, until cancelled.

    Args:
        name: thread name.
        initial_delay_s: seconds before the first call.
        interval_s: seconds between calls.
        action: what to do; exceptions are logged and the task goes on.
    """

    def __init__(
        self, name: str, initial_delay_s: float, interval_s: float, action: Callable[[], None]
    ) -> None:
        self._initial_delay_s = initial_delay_s
        self._interval_s = interval_s
        self._action = action
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the timer thread."""
        self._thread.start()

    def cancel(self) -> None:
        """Stop calling ``action``; does not wait for a call in progress."""
        self._stopped.set()

    def _run(self) -> None:
        delay = self._initial_delay_s
        while not self._stopped.wait(delay):
            try:
                self._action()
            except Exception:
                _log.exception("periodic task %s failed", self._thread.name)
            delay = self._interval_s
