"""Honest statistics across seeds: the mean with a 95 % percentile-bootstrap interval and the
interquartile mean. One interval everywhere (summaries, ``rollax eval``, figures): 10,000
resamples of the seeds with a fixed generator (``random_state=0``), so it is reproducible."""

from __future__ import annotations

import numpy as np

RESAMPLES = 10_000
CONFIDENCE = 0.95


def mean_interval(x) -> tuple[float, float, float]:
    """``(mean, low, high)`` of the finite values of ``x`` (1-D): the 95 % percentile-bootstrap
    interval of the mean. One value, or values that are all equal, give ``low = high = mean``;
    no finite value gives NaNs."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        nan = float("nan")
        return nan, nan, nan
    mean = float(x.mean())
    if x.size < 2 or np.ptp(x) == 0:
        return mean, mean, mean
    from scipy import stats  # here: importing it takes ~0.5 s, and one seed never needs it

    ci = stats.bootstrap((x,), np.mean, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                         # scipy takes random_state through a decorator, not its signature;
                         # rng=0 would draw another resample stream
                         method="percentile", random_state=0).confidence_interval  # pyright: ignore[reportCallIssue]
    return mean, float(ci.low), float(ci.high)


def summarize(values) -> dict:
    """``{"n", "mean", "ci95": [low, high], "iqm"}`` over the finite ``values`` (one per seed);
    ``None`` where there is no finite value. The IQM is the mean of the middle half (a quarter
    of the sorted values cut from each end, rounded down)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"n": 0, "mean": None, "ci95": [None, None], "iqm": None}
    mean, low, high = mean_interval(x)
    s = np.sort(x)
    cut = x.size // 4
    return {"n": int(x.size), "mean": mean, "ci95": [low, high],
            "iqm": float(s[cut: x.size - cut].mean())}


def curve_band(curves) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of ``curves`` (seeds, points): the :func:`mean_interval` of its finite values,
    as three arrays ``(mean, low, high)`` of shape ``(points,)``."""
    curves = np.asarray(curves, dtype=np.float64)
    rows = [mean_interval(curves[:, j]) for j in range(curves.shape[1])]
    if not rows:
        empty = np.zeros(0)
        return empty, empty, empty
    mean, low, high = (np.asarray(col) for col in zip(*rows))
    return mean, low, high
