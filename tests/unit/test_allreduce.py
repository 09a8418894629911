"""`dlperf allreduce`'s bus bandwidth, as nccl-tests defines it for an allreduce."""

from __future__ import annotations

import pytest
from dlperf.allreduce import bus_factor


@pytest.mark.parametrize(
    ("ranks", "factor"), [(1, 0.0), (2, 1.0), (3, 4 / 3), (4, 1.5), (32, 1.9375)]
)
def test_bus_bandwidth_is_algbw_times_two_n_minus_one_over_n(ranks, factor):
    # One rank's "reduction" is a local copy: no link carries it, so no bus bandwidth.
    assert bus_factor(ranks) == pytest.approx(factor)
