"""A metric across releases drawn: the terminal table, an SVG (each release's value and its interval)
and an HTML page holding both (``fourfold history show``).

The SVG is matplotlib's with text as paths (as the report's plots: :mod:`fourfold.reports.plots`),
and every string from a run (release, group, version) in the HTML is escaped.
"""

from __future__ import annotations

import html
import io
import os
from pathlib import Path

from fourfold.history.check import Point
from fourfold.reports.glossary import fmt_value
from fourfold.reports.plots import COLORS, _pyplot, text

__all__ = ["render_table", "write_trend"]


def _ci(point: Point, unit: str) -> str:
    if point.low is None or point.high is None:
        return "-"
    return f"{fmt_value(point.low, unit)} .. {fmt_value(point.high, unit)}"


def table_rows(points: list[Point], unit: str) -> list[list[str]]:
    return [[p.release, str(p.runs), fmt_value(p.value, unit), _ci(p, unit), p.why, p.version or "?",
             p.added_at] for p in points]


HEADER = ["release", "runs", "value", "95% interval", "interval from", "fourfold", "added"]


def render_table(metric: str, unit: str, trend: dict[str, list[Point]]) -> str:
    """The terminal's table, one block per group."""
    lines = []
    for group, points in trend.items():
        rows = [HEADER, *table_rows(points, unit)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
        lines += [f"{group}: {metric} ({unit})" if unit else f"{group}: {metric}"]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.append("")
    return "\n".join(lines)


def svg(metric: str, unit: str, trend: dict[str, list[Point]]) -> str:
    """Each group's values by release (in the order they ran), an error bar for each interval."""
    plt = _pyplot()
    releases = list(dict.fromkeys(p.release for points in trend.values() for p in points))
    x_of = {release: i for i, release in enumerate(releases)}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(releases) + 3), 4.0))
    try:
        for i, (group, points) in enumerate(trend.items()):
            xs = [x_of[p.release] for p in points]
            ys = [p.value for p in points]
            low = [p.value - p.low if p.low is not None else 0.0 for p in points]
            high = [p.high - p.value if p.high is not None else 0.0 for p in points]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=4, color=COLORS[i % len(COLORS)],
                        label=text(group))
        ax.set_xticks(range(len(releases)))
        ax.set_xticklabels([text(r) for r in releases], rotation=30, ha="right")
        ax.set_ylabel(text(f"{metric} ({unit})" if unit else metric))
        ax.set_title(text(f"{metric} by release (bars: 95% interval)"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
        return buffer.getvalue()
    finally:
        plt.close(fig)


def page(metric: str, unit: str, trend: dict[str, list[Point]], picture: str) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>fourfold history: {e(metric)}</title>"
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}td:first-child{text-align:left}"
             "</style></head><body>", f"<h1>{e(metric)} by release</h1>",
             picture[picture.find("<svg"):]]
    for group, points in trend.items():
        head = "".join(f"<th>{e(h)}</th>" for h in HEADER)
        parts.append(f"<h2>{e(group)}</h2><table><tr>{head}</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                  for row in table_rows(points, unit)]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_trend(metric: str, unit: str, trend: dict[str, list[Point]],
                out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``trend-<metric>.svg`` and ``trend-<metric>.html`` in ``out_dir`` (created); their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    picture = svg(metric, unit, trend)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in metric)
    svg_path, html_path = out / f"trend-{safe}.svg", out / f"trend-{safe}.html"
    svg_path.write_text(picture, encoding="utf-8")
    html_path.write_text(page(metric, unit, trend, picture), encoding="utf-8")
    return svg_path, html_path
