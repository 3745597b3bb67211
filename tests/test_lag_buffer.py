"""The lag buffer under load: with the last byo-yomi period running and two CPU hogs beside it, `tabula gtp` (time
only, the shipped network) answers genmove with at least the lag buffer left, as a server's clock needs."""
import multiprocessing
import sys
import time

import pytest

from tabula.tools.compete.gtp_client import GtpEngine

PERIOD_S = 5.0
LAG_BUFFER_S = 1.0  # TimeConfig's default


def _hog(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


@pytest.mark.slow
def test_last_period_replies_leave_the_lag_buffer_under_a_cpu_hog():
    hogs = [multiprocessing.Process(target=_hog, args=(time.time() + 60.0,), daemon=True) for _ in range(2)]
    for hog in hogs:
        hog.start()
    try:
        with GtpEngine([sys.executable, "-m", "tabula.gtp", "--player", "search", "--visits", "0"],
                       label="tabula") as engine:
            engine.send("boardsize 9")
            engine.send("clear_board")
            engine.send(f"kgs-time_settings byoyomi 0 {PERIOD_S:g} 3")
            replies = []
            for color in ("b", "w", "b"):
                engine.send(f"time_left {color} {PERIOD_S:g} 1")  # the last period
                started = time.monotonic()
                engine.send(f"genmove {color}", timeout_s=30)
                replies.append(time.monotonic() - started)
    finally:
        for hog in hogs:
            hog.terminate()
    print("genmove replies (s):", [round(r, 2) for r in replies])
    # The search spends the period less the lag buffer; the reply must come before the buffer is touched.
    assert max(replies) <= PERIOD_S - LAG_BUFFER_S, replies
    assert min(replies) >= 1.0, replies  # and it did search: most of the period is used
