#!/usr/bin/env python3
"""PNG charts of the benchmarks' side-by-side comparisons: grouped
bars of ratios per workload, with a line at 1.0, so that a reader sees the
ratios at a glance next to the table the benchmark prints.

    bench/mount_bench.py imports it (its --chart option);
    /usr/bin/python3 bench/chart.py store RESULTS.json OUT.png
        charts store-bench's --json-file results (make bench-store does).

matplotlib (Debian: python3-matplotlib) draws them, with its Agg backend (no
display needed).  Without it a chart is skipped with a message on stderr,
never an error: the table is the result, the chart a view of it.
"""
import json
import math
import os
import sys
import textwrap


class Skipped(Exception):
    """The chart could not be drawn; str() says why."""


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise Skipped("python3-matplotlib is not installed (apt-get install "
                      "python3-matplotlib, or make deps)")
    return plt


def _panel(ax, groups, series, ylabel, colors, log, targets=None):
    """Grouped bars on @ax: one group per workload in @groups, one bar per
    (name, values) of @series (a value None: no bar), each labelled with its
    value, a dashed line at 1.0, and a red tick at @targets[i] over group i."""
    n = max(1, len(series))
    width = 0.8 / n
    values = [v for _, vs in series for v in vs if v]
    for k, (name, vs) in enumerate(series):
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(groups))]
        hs = [v if v else 0 for v in vs]
        bars = ax.bar(xs, hs, width, label=name, color=colors[k % len(colors)],
                      edgecolor="black", linewidth=0.3)
        for b, v in zip(bars, vs):
            if v:
                ax.annotate("%.3f" % v if v < 0.1 else "%.2f" % v if v < 10 else "%.0f" % v,
                            (b.get_x() + b.get_width() / 2, b.get_height()),
                            xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=6 if n > 2 else 7,
                            rotation=90 if n > 2 else 0)
    ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--", zorder=0)
    for k, (i, t) in enumerate(sorted((targets or {}).items())):
        ax.plot([i - 0.45, i + 0.45], [t, t], color="#c44e52", linewidth=2.5,
                label="target" if k == 0 else None)
    if log and values and (max(values) / max(min(values), 1e-9)) > 20:
        ax.set_yscale("log")
        lo, hi = min(values + [1.0]), max(values + [1.0])
        # Room above the tallest bar for its label and the legend.
        ax.set_ylim(10 ** math.floor(math.log10(lo) - 0.05), 10 ** (math.log10(hi) + 0.8))
    else:
        ax.set_ylim(0, max(values + [1.0]) * 1.3)
    ax.set_xticks(range(len(groups)))
    if len(groups) <= 8:
        # Few groups: upright labels, wrapped to the width of a group.
        ax.set_xticklabels(["\n".join(textwrap.wrap(g.split("\n")[0], 20) + g.split("\n")[1:])
                            for g in groups], fontsize=8)
    else:
        ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    ax.legend(fontsize=7, ncol=min(n, 4), loc="upper left")


def ratio_chart(path, title, panels, note=None):
    """Writes a PNG to @path: one panel per dict of @panels, each with
    "groups" (workload names), "series" ([(name, [ratio or None])]),
    "ylabel", optional "title", "colors", "targets" ({group index: ratio})
    and "log" (default True: a log scale if the ratios span more than 20x).
    Raises Skipped without matplotlib."""
    plt = _pyplot()
    ngroups = max(len(p["groups"]) for p in panels)
    # Upright labels (8 groups or fewer) need more room a group than slanted ones.
    width = 1.7 * ngroups + 1.5 if ngroups <= 8 else 0.75 * ngroups + 3
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(max(8, width), 3.6 * len(panels) + 0.8))
    for ax, p in zip(axes[:, 0], panels):
        _panel(ax, p["groups"], p["series"], p["ylabel"],
               p.get("colors") or ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
                                   "#937860"], p.get("log", True), p.get("targets"))
        if p.get("title"):
            ax.set_title(p["title"], fontsize=10)
    fig.suptitle(title, fontsize=11)
    if note:
        fig.text(0.01, 0.005, note, fontsize=7, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 0.97))
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def shades(base, n):
    """@n colours from dark to light of one hue: the timeouts of a target."""
    import colorsys
    r, g, b = (int(base[i:i + 2], 16) / 255 for i in (1, 3, 5))
    h, l, s = colorsys.rgb_to_hls(r, g, b)
    out = []
    for k in range(n):
        lk = 0.30 + 0.45 * (k / max(1, n - 1)) if n > 1 else l
        rr, gg, bb = colorsys.hls_to_rgb(h, lk, s)
        out.append("#%02x%02x%02x" % (int(rr * 255), int(gg * 255), int(bb * 255)))
    return out


# --- store-bench ------------------------------------------------------------------

def store_chart(results, path):
    """The chart of store-bench's JSON results @results (a dict): store rate
    over plain rate per phase that ran, the targets marked."""
    rows = [(k, v) for k, v in results["phases"].items() if v.get("ran", True)
            and (v["plain"] > 0 or v["store"] > 0)]
    if not rows:
        raise Skipped("no phase was run")
    targets = {"large_write": 0.70, "read_cold": 0.80}
    panels = [{"groups": ["%s\n%.0f vs %.0f %s" % (v.get("label", k), v["plain"], v["store"],
                                                  v["unit"]) for k, v in rows],
               "series": [("store / plain", [v["ratio"] or None for _, v in rows])],
               "ylabel": "store rate / plain rate (higher is better)", "log": False,
               "colors": ["#4c72b0"],
               "targets": {i: targets[k] for i, (k, _) in enumerate(rows) if k in targets}}]
    note = ("%d MiB large write/read, median of %d round%s%s; under each phase: plain vs "
            "store rate; %d CPUs, load %.2f at the start; dashed: 1.0, as fast as plain"
            % (results["size_mib"], results["rounds"], "" if results["rounds"] == 1 else "s",
               " (quick)" if results.get("quick") else "", results["cpus"],
               results["load_start"]))
    ratio_chart(path, "store-bench: the extent store next to pwrite/pread on the same disk",
                panels, note)


def main(argv):
    if len(argv) != 4 or argv[1] != "store":
        sys.exit("usage: chart.py store RESULTS.json OUT.png")
    try:
        with open(argv[2]) as f:
            results = json.load(f)
        store_chart(results, argv[3])
    except Skipped as e:
        print("store-bench: chart skipped: %s" % e, file=sys.stderr)
        return 0
    except (OSError, ValueError, KeyError) as e:
        print("store-bench: chart skipped: cannot read %s: %s" % (argv[2], e), file=sys.stderr)
        return 0
    print("chart: %s" % argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
