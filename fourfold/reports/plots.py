"""Plots for the HTML report (matplotlib, Agg backend), each returned as an SVG data URI.

An SVG inside ``<img src="data:image/svg+xml;base64,...">`` cannot run scripts (browsers load
image SVGs without scripting) and matplotlib draws text as paths, so no string from a run reaches
the page as markup. Large inputs are thinned before drawing (a CDF keeps at most ``CDF_POINTS``
quantiles), so a million-record run plots as fast as a small one.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fourfold.measure.histogram import bucket_values
from fourfold.measure.rhythm import WAVEFORM_INTERVAL_MS, waveform
from fourfold.reports.compare import GroupSample

__all__ = ["CDF_POINTS", "COLORS", "PHASE_COLORS", "WAVEFORM_LEGEND", "Series", "Waveform", "cdf_plot",
           "itl_plot", "phases_plot",
           "similarity_plot", "tokens_plot", "waveform_plot"]

CDF_POINTS = 2000
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


@dataclass
class Series:
    label: str
    sample: GroupSample


@dataclass
class Waveform:
    title: str
    offsets_ms: Sequence[float]
    output_tokens: int
    worst: bool = False             # the worst request (dashed outline) rather than the typical one (filled)


WAVEFORM_LEGEND = {False: "typical request (filled)", True: "worst request (dashed)"}


def text(value: str) -> str:
    """A string from a run, drawn literally (``$`` would start matplotlib's math mode)."""
    return str(value).replace("$", r"\$")


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "fourfold"
    matplotlib.rcParams["svg.fonttype"] = "path"
    import matplotlib.pyplot as plt

    return plt


def _data_uri(fig, crop: bool = True) -> str:  # type: ignore[no-untyped-def]
    """``fig`` as an SVG data URI; ``crop``: cut to what is drawn (one more drawing pass: a figure laid
    out by ``tight_layout`` already fits its page)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight" if crop else None, metadata={"Date": None})
    _pyplot().close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(title: str, xlabel: str, ylabel: str,  # type: ignore[no-untyped-def]
            size: tuple[float, float] = (6.0, 3.4)):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=size)
    ax.set_title(text(title), fontsize=10)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _thin(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = sorted_values.size
    if n <= CDF_POINTS:
        return sorted_values, np.arange(1, n + 1) / n
    probs = np.linspace(0, 1, CDF_POINTS)
    index = np.minimum((probs * (n - 1)).round().astype(np.int64), n - 1)
    return sorted_values[index], (index + 1) / n


def cdf_plot(title: str, series: list[Series], field: str, xlabel: str) -> str | None:
    """Overlaid empirical CDFs of one sorted per-request array (``ttft_ms``, ``e2e_ms``)."""
    drawn = [(s, getattr(s.sample, field)) for s in series if getattr(s.sample, field).size]
    if not drawn:
        return None
    fig, ax = _figure(title, xlabel, "share of ok requests ≤ x")
    for i, (s, values) in enumerate(drawn):
        x, y = _thin(values)
        ax.step(x, y, where="post", color=COLORS[i % len(COLORS)], label=text(s.label), linewidth=1.4)
    for q in (0.95, 0.99):
        ax.axhline(q, color="grey", linewidth=0.6, linestyle=":")
    ax.set_ylim(0, 1.01)
    ax.legend(fontsize=8)
    return _data_uri(fig)


def itl_plot(title: str, series: list[Series]) -> str | None:
    """Share of pooled chunk gaps per log-spaced bin (log x axis)."""
    drawn = [s for s in series if s.sample.itl is not None and s.sample.itl.count]
    if not drawn:
        return None
    lows = [max(s.sample.itl.min, 0.01) for s in drawn if s.sample.itl]
    highs = [s.sample.itl.max for s in drawn if s.sample.itl]
    edges = np.geomspace(min(lows) * 0.9, max(max(highs), min(lows) * 2) * 1.1, 61)
    fig, ax = _figure(title, "gap between content chunks (ms, log scale)", "share of gaps")
    for i, s in enumerate(drawn):
        itl = s.sample.itl
        assert itl is not None
        values = np.clip(bucket_values(itl.keys), edges[0], edges[-1])
        shares, _ = np.histogram(values, bins=edges, weights=itl.counts / itl.count)
        ax.stairs(shares, edges, color=COLORS[i % len(COLORS)], label=text(s.label), linewidth=1.4)
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    return _data_uri(fig)


def tokens_plot(title: str, series: list[Series]) -> str | None:
    drawn = [s for s in series if s.sample.tokens_per_s.size]
    if not drawn:
        return None
    fig, ax = _figure(title, "seconds since the group's first request", "output tokens per second")
    for i, s in enumerate(drawn):
        y = s.sample.tokens_per_s
        ax.step(np.arange(y.size), y, where="post", color=COLORS[i % len(COLORS)], label=text(s.label),
                linewidth=1.2)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return _data_uri(fig)


def similarity_plot(title: str, series: list[Series]) -> str | None:
    drawn = [s for s in series if s.sample.similarity.size]
    if not drawn:
        return None
    low = min(float(s.sample.similarity.min()) for s in drawn)
    edges = np.linspace(min(low, 0.9) - 0.01, 1.0001, 41)
    fig, ax = _figure(title, "cosine similarity to the reference answer", "share of answers")
    for i, s in enumerate(drawn):
        values = s.sample.similarity
        shares, _ = np.histogram(values, bins=edges, weights=np.full(values.size, 1 / values.size))
        ax.stairs(shares, edges, color=COLORS[i % len(COLORS)], label=text(s.label), linewidth=1.4)
    ax.legend(fontsize=8)
    return _data_uri(fig)


def waveform_plot(title: str, waves: list[Waveform], color: str = COLORS[0]) -> str | None:
    """One panel per stream: tokens per 50 ms interval against time since the request was sent
    (:func:`fourfold.measure.rhythm.waveform`), all in the side's ``color`` (the one its series has
    in the other plots): the typical request filled, the worst one a dashed outline, each labelled
    in its panel's legend (:data:`WAVEFORM_LEGEND`)."""
    if not waves:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(waves), 1, figsize=(6.4, 1.5 * len(waves) + 0.6), squeeze=False)
    for ax, wave in zip(axes[:, 0], waves, strict=True):
        counts, edges = waveform(wave.offsets_ms, wave.output_tokens)
        if wave.worst:
            ax.stairs(counts, edges, color=color, linestyle="--", linewidth=1.4, label=WAVEFORM_LEGEND[True])
        else:
            ax.stairs(counts, edges, fill=True, color=color, alpha=0.8, label=WAVEFORM_LEGEND[False])
        ax.set_title(text(wave.title), fontsize=8)
        ax.set_ylabel(f"tok/{WAVEFORM_INTERVAL_MS:.0f} ms", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("ms since the request was sent", fontsize=8)
    fig.suptitle(text(title), fontsize=10)
    fig.tight_layout()
    return _data_uri(fig, crop=False)


# one colour per request phase, whatever the side (the sides are the bars' labels)
PHASE_COLORS = {"dns_ms": "#8c564b", "tcp_ms": "#ff7f0e", "tls_ms": "#9467bd", "send_ms": "#2ca02c",
                "wait_ms": "#7f7f7f"}


def phases_plot(title: str, bars: list[tuple[str, dict[str, float]]]) -> str | None:
    """Stacked horizontal bars: per (side, connection kind) label, the mean of each request phase (ms),
    in the order a request meets them."""
    if not bars:
        return None
    fig, ax = _figure(title, "mean time (ms)", "", size=(6.0, 0.5 * len(bars) + 1.4))
    labels = [text(label) for label, _ in bars]
    left = np.zeros(len(bars))
    for name, color in PHASE_COLORS.items():
        widths = np.array([means.get(name, 0.0) for _, means in bars])
        if widths.any():
            ax.barh(labels, widths, left=left, color=color, label=name.removesuffix("_ms"))
            left += widths
    ax.invert_yaxis()
    ax.legend(fontsize=7, ncols=len(PHASE_COLORS), loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return _data_uri(fig)
