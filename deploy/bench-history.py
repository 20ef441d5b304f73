#!/usr/bin/env python3
"""Renders the benchmark history (docs/benchmark-history.csv) as the table
in docs/benchmarks.md (between the history markers) and as the chart
docs/images/benchmark-history.svg. With --check, changes nothing and exits 1
naming what is stale.

Usage: deploy/bench-history.py [--check]
"""
import csv
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSV = os.path.join(ROOT, "docs", "benchmark-history.csv")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
SVG = os.path.join(ROOT, "docs", "images", "benchmark-history.svg")
BEGIN = "<!-- history:begin (deploy/bench-history.py writes this table) -->"
END = "<!-- history:end -->"

# The charted ratios: figure, title, the bar (issue 27), whether the bar is a floor.
PANELS = [
    ("log.batch-1", "log, 1 turn per txn ÷ raw LMDB", 0.8, True),
    ("log.batch-100", "log, 100 per txn ÷ raw LMDB", 0.8, True),
    ("log.batch-1000.of-raw-with-state", "log, 1,000 per txn ÷ raw with state", 0.75, True),
    ("cluster.round-trip.p50", "op round trip p50 ÷ echo + commit", 1.15, False),
    ("cluster.clients-16", "16 clients turns/s ÷ raw LMDB", 0.25, True),
    ("cluster.leader-cpu-per-op", "leader CPU per op ÷ graph turn", 5.0, False),
]


def read_rows():
    with open(CSV, encoding="utf-8") as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("".join(lines))))


def entries(rows):
    """The measured changes in file order, each with its figures by name."""
    order, by_key = [], {}
    for row in rows:
        key = (row["date"], row["commit"], row["load"])
        if key not in by_key:
            by_key[key] = {}
            order.append(key)
        by_key[key][row["figure"]] = row
    return [(key, by_key[key]) for key in order]


def span(text):
    """A number or a `low-high` range, as (low, high); None when empty."""
    if not text:
        return None
    if "-" in text[1:]:
        low, high = text.split("-", 1)
        return float(low), float(high)
    return float(text), float(text)


def number(text):
    value = float(text)
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}"


def shown(text):
    return "–".join(number(part) for part in text.split("-", 1)) if "-" in text[1:] else number(text)


def cell(figure, row):
    if row is None:
        return ""
    ratio, value, baseline = row["ratio"], row["value"], row["baseline"]
    if figure == "cluster.lag.p99-ms":
        return f"{shown(value)} ms"
    if figure == "cluster.clients-16":
        kilo = "–".join(f"{float(part) / 1000:.1f}k" for part in value.split("-", 1)) if value else ""
        return f"{kilo} ({shown(ratio)})" if kilo else shown(ratio)
    if figure == "cluster.leader-cpu-per-op" and value and baseline:
        return f"{shown(value)} ÷ {shown(baseline)} µs = {shown(ratio)}"
    if figure == "cluster.round-trip.p50" and value and baseline:
        return f"{shown(ratio)} ({shown(value)} ÷ {shown(baseline)} µs)"
    if value and baseline:
        return f"{shown(ratio)} ({shown(value)} ÷ {shown(baseline)})"
    return shown(ratio)


COLUMNS = [
    ("log.batch-1", "log 1/txn"),
    ("log.batch-100", "log 100/txn"),
    ("log.batch-1000.of-raw-with-state", "log 1,000/txn ÷ raw-with-state"),
    ("cluster.round-trip.p50", "round trip p50 ÷ echo + commit"),
    ("cluster.clients-16", "16 clients turns/s (÷ raw LMDB)"),
    ("cluster.leader-cpu-per-op", "leader CPU per op ÷ graph turn"),
    ("cluster.lag.p99-ms", "lag p99"),
]


def table(history):
    out = ["| date | commit | machine | " + " | ".join(title for _, title in COLUMNS) + " |"]
    out.append("|" + "---|" * (3 + len(COLUMNS)))
    for (date, commit, load), figures in history:
        cells = [cell(figure, figures.get(figure)) for figure, _ in COLUMNS]
        out.append(f"| {date} | {commit} | {load} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def svg(history):
    width, height = 1000, 600
    columns, rows = 3, 2
    cell_w, cell_h = width / columns, (height - 56) / rows
    labels = [f"{date} {commit}".strip() for (date, commit, _), _ in history]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="12" y="20" font-size="14" font-weight="bold">cogd benchmark history: each figure over the same run\'s baseline</text>',
        '<text x="12" y="36" fill="#555">dashed: the bar; hollow: measured on a busy machine; a vertical bar: the range a series of runs spanned</text>',
    ]
    for index, (figure, title, bar, floor) in enumerate(PANELS):
        left = (index % columns) * cell_w + 50
        top = 56 + (index // columns) * cell_h + 24
        plot_w, plot_h = cell_w - 110, cell_h - 90
        points = []
        for position, ((_, _, load), figures) in enumerate(history):
            row = figures.get(figure)
            value = span(row["ratio"]) if row else None
            if value:
                points.append((position, value, load))
        highest = max([bar] + [high for _, (_, high), _ in points]) * 1.15
        def y(v):
            return top + plot_h - v / highest * plot_h
        def x(position):
            return left + (position + 0.5) * plot_w / max(1, len(history))
        parts.append(f'<text x="{left}" y="{top - 8}" font-weight="bold">{title}</text>')
        parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>')
        for tick in range(0, 5):
            v = highest * tick / 4
            parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#555">{v:.2g}</text>')
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(bar):.1f}" y2="{y(bar):.1f}" stroke="#c33" stroke-dasharray="5,4"/>')
        parts.append(
            f'<text x="{left + plot_w + 4}" y="{y(bar) + 4:.1f}" fill="#c33">{"≥" if floor else "≤"} {bar:g}</text>')
        line = " ".join(f"{x(p):.1f},{y((lo + hi) / 2):.1f}" for p, (lo, hi), _ in points)
        parts.append(f'<polyline points="{line}" fill="none" stroke="#36c" stroke-width="1.5"/>')
        for position, (low, high), load in points:
            if high > low:
                parts.append(f'<line x1="{x(position):.1f}" x2="{x(position):.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}" stroke="#36c" stroke-width="3"/>')
            fill = "white" if load == "busy" else "#36c"
            parts.append(f'<circle cx="{x(position):.1f}" cy="{y((low + high) / 2):.1f}" r="4" fill="{fill}" stroke="#36c" stroke-width="1.5"/>')
        for position, label in enumerate(labels):
            parts.append(
                f'<text transform="translate({x(position):.1f},{top + plot_h + 10}) rotate(30)" font-size="9" fill="#333">{escape(label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main(arguments):
    check = arguments == ["--check"]
    if arguments and not check:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    history = entries(read_rows())
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        print(f"bench-history: {DOC} has no history markers", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new_doc = head + BEGIN + "\n" + table(history) + END + tail
    new_svg = svg(history)
    current_svg = open(SVG, encoding="utf-8").read() if os.path.exists(SVG) else ""
    stale = [path for path, old, new in [(DOC, doc, new_doc), (SVG, current_svg, new_svg)] if old != new]
    if check:
        for path in stale:
            print(f"bench-history: {os.path.relpath(path, ROOT)} is not what docs/benchmark-history.csv gives; run deploy/bench-history.py",
                  file=sys.stderr)
        return 1 if stale else 0
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(new_doc)
    os.makedirs(os.path.dirname(SVG), exist_ok=True)
    with open(SVG, "w", encoding="utf-8") as f:
        f.write(new_svg)
    print(f"wrote {os.path.relpath(DOC, ROOT)} (history table) and {os.path.relpath(SVG, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
