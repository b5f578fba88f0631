"""The page's plots: matplotlib figures rendered to inline SVG, deterministically (a fixed id salt per figure,
no date), so the same results give the same bytes. matplotlib is imported when a figure is made."""

from __future__ import annotations

import io
import math
from collections.abc import Container

from benchmark.leaderboard.render import YOURS, split_text

PLOTTED_ENTRIES = 10  # the plots show the first entries by rank (and the reference); the table lists all
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]  # matplotlib's tab10, one per plotted entry in rank order: at most 10 besides the reference
REFERENCE_COLOUR = "#222222"  # the reference is drawn dashed in near-black, never in an entry's colour
HIGHLIGHT_COLOUR = "#c2007a"  # "your" entry (--highlight): a deep magenta that is none of tab10's, drawn thicker
WIDER = 1.8  # how much thicker the highlighted entry's lines and markers are
_M = 1e6  # compute is shown in millions of units
STEPS_LINEAR_UP_TO = 10  # a staleness axis is linear up to this many steps, logarithmic beyond it once it must reach
STEPS_LOG_FROM = 50  # this far: a control a thousand steps stale would otherwise squeeze every other entry into 0-10


def _svg(fig, name: str) -> str:
    """The figure as an inline <svg> element. A salt per figure keeps element ids unique on the page."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"replaybench-{name}", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):].strip()


def _figure(width: float, height: float, ncols: int = 1):
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def _steps_axis(ax, largest: float) -> bool:
    """A staleness axis (trainer steps) on which the entries of a few steps stay apart beside one of hundreds;
    whether it went logarithmic."""
    if largest < STEPS_LOG_FROM:
        return False
    ax.set_xscale("symlog", linthresh=STEPS_LINEAR_UP_TO, linscale=1.5)
    ticks = [0, 2, 5, *(10 ** k for k in range(1, math.floor(math.log10(largest)) + 1))]  # within the data
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    return True


def as_float(x) -> float:
    """A results number as a float, undefined (None) as nan."""
    return math.nan if x is None else float(x)


def _legend_label(e: dict, workload: str, highlighted: Container[str] = ()) -> str:
    split = split_text(e, workload)
    return (e["label"] + ("" if split in e["label"] else f" {split}") + (", reference" if e["reference"] else "")
            + _yours(e, highlighted))


def _yours(e: dict, highlighted: Container[str]) -> str:
    return YOURS if e["key"] in highlighted else ""


def _width(e: dict, highlighted: set[str], base: float) -> float:
    return base * WIDER if e["key"] in highlighted else base


def _mark_id(plot: str, workload: str, e: dict, highlighted: Container[str]) -> str | None:
    """The SVG id (matplotlib's gid) of a highlighted entry's curve or point, unique on the page: a reader's or a
    test's handle on "my curve". None for the others, whose SVG stays as it was."""
    return f"yours-{plot}-{workload}-{e['key']}" if e["key"] in highlighted else None


def _legend_outside(ax) -> None:
    """The legend right of the axes: inside, it would cover curves and points whichever corner it took."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8, frameon=False)


def curves_plot(results: dict, workload: str, plotted: list[dict], colours: dict,
                highlighted: Container[str] = ()) -> str:
    """Accuracy vs compute: each entry's median over seeds, its 25-75% band shaded; the highlighted ones on top,
    thicker."""
    w = results["workloads"][workload]
    fig, ax = _figure(10, 4.2)
    for e in plotted:
        band = e["workloads"][workload]["accuracy_curve"]
        x = [c / _M for c in band["compute"]]
        colour = colours[e["key"]]
        ax.fill_between(x, band["q1"], band["q3"], color=colour, alpha=0.18, linewidth=0)
        ax.plot(x, band["median"], color=colour, marker="o", markersize=_width(e, highlighted, 3),
                linewidth=_width(e, highlighted, 1.6), linestyle="--" if e["reference"] else "-",
                label=_legend_label(e, workload, highlighted), gid=_mark_id("curves", workload, e, highlighted),
                zorder=2.5 if e["key"] in highlighted else 2)  # 2: a line's default
    if w.get("published_reference"):  # this store lacks the reference's runs: the published board's curve
        ref = w["published_reference"]
        band = ref["accuracy_curve"]
        x = [c / _M for c in band["compute"]]
        ax.fill_between(x, band["q1"], band["q3"], color=REFERENCE_COLOUR, alpha=0.12, linewidth=0)
        ax.plot(x, band["median"], color=REFERENCE_COLOUR, linewidth=1.6, linestyle="--",
                label=f"{ref['label']} ({ref['workers']},{ref['trainers']}), reference, published board")
    for i, p in enumerate(x for x in results.get("previews", []) if x["workload"] == workload):
        ax.plot([c / _M for c in p["accuracy_curve"]["compute"]], p["accuracy_curve"]["accuracy"],
                color=COLOURS[(len(plotted) + i) % len(COLOURS)], linestyle=":", marker=".", linewidth=1.2,
                label=f"{p['name']} (preview, seed {p['seed']}, not ranked)")
    ax.axhline(w["target_accuracy"], color="0.35", linewidth=0.8, linestyle=":")
    ax.annotate(f"target {w['target_accuracy']:.3f}", (0, w["target_accuracy"]), xytext=(4, 3),
                textcoords="offset points", fontsize=8, color="0.35")
    ax.set_xlim(0, w["budget"] / _M)
    ax.set(xlabel="compute (M units)", ylabel="eval accuracy",
           title=f"{workload}: accuracy vs compute (median over seeds, band: 25–75%)")
    ax.grid(alpha=0.3)
    if plotted or w.get("published_reference") or results.get("previews"):
        _legend_outside(ax)
    return _svg(fig, f"curves-{workload}")


def preview_plot(name: str, curve: list[dict], reference: dict | None, target: float | None, budget: float) -> str:
    """`submit --preview`: one run's accuracy curve beside the published reference's median (and band)."""
    fig, ax = _figure(8, 3.6)
    if reference:
        band = reference["accuracy_curve"]
        x = [c / _M for c in band["compute"]]
        ax.fill_between(x, band["q1"], band["q3"], color=REFERENCE_COLOUR, alpha=0.12, linewidth=0)
        ax.plot(x, band["median"], color=REFERENCE_COLOUR, linestyle="--", linewidth=1.4,
                label=f"{reference['label']}, reference (published board)")
    ax.plot([p["compute"] / _M for p in curve], [p["accuracy"] for p in curve], color=COLOURS[0], marker="o",
            markersize=3, linewidth=1.6, label=f"{name} (preview, one seed)")
    if target is not None:
        ax.axhline(target, color="0.35", linewidth=0.8, linestyle=":")
    ax.axvline(budget / _M, color="0.6", linewidth=0.8)
    ax.set(xlabel="compute (M units)", ylabel="eval accuracy", title=f"{name}: preview, not ranked")
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    return _svg(fig, f"preview-{name}")


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (less compute, higher accuracy), by compute."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def _label_points(fig, ax, labels: list[tuple[float, float, str, str]], fontsize: float = 8) -> None:
    """Name each (x, y, text, colour) point beside it, moving a name down or up (with a thin leader line),
    within the axes, until it overlaps no name placed before it: entries with equal results share a point."""
    fig.draw_without_rendering()  # settle the layout first, so data -> points below is the final mapping
    to_points = 72 / fig.dpi
    box = ax.get_window_extent()
    right_edge, bottom, top = box.x1 * to_points, box.y0 * to_points, box.y1 * to_points
    height = fontsize * 1.3
    placed: list[tuple[float, float, float, float]] = []
    for x, y, text, colour in sorted(labels, key=lambda t: (-t[1], t[0], t[2])):
        px, py = (v * to_points for v in ax.transData.transform((x, y)))
        width = 0.62 * fontsize * len(text)
        left = px + width + 8 <= right_edge  # the name right of its point, unless it would leave the axes
        x0 = px + 6 if left else px - 6 - width
        lift = fontsize * 0.8  # just above the point, clear of its horizontal bar
        for step in range(60):  # 0, -1, +1, -2, +2, ... label heights
            dy = lift + height * ((step + 1) // 2) * (-1 if step % 2 else 1)
            y0 = py + dy - height / 2
            if bottom <= y0 and y0 + height <= top and not any(
                    x0 < b[2] and b[0] < x0 + width and y0 < b[3] and b[1] < y0 + height for b in placed):
                break
        else:  # no free place: beside the point, overlapping
            dy, y0 = lift, py + lift - height / 2
        placed.append((x0, y0, x0 + width, y0 + height))
        note = ax.annotate(text, (x, y), xytext=(6 if left else -6, dy), textcoords="offset points", fontsize=fontsize,
                           color=colour, ha="left" if left else "right", va="center",
                           arrowprops={"arrowstyle": "-", "color": colour, "linewidth": 0.5, "alpha": 0.6,
                                       "shrinkA": 0, "shrinkB": 3} if dy != lift else None)
        note.set_in_layout(False)  # names never move the axes: the mapping computed above stays right


def pareto_plot(results: dict, workload: str, plotted: list[dict], colours: dict,
                highlighted: Container[str] = ()) -> str:
    """Best accuracy vs compute-to-target (the budget where the target is never reached), every entry;
    the plotted entries with their 25-75% bars and names, the others as grey dots."""
    w = results["workloads"][workload]
    budget = w["budget"]
    fig, ax = _figure(10, 4.2)
    points, others, labels = [], {True: [], False: []}, []
    for e in results["entries"]:
        d = e["workloads"][workload]
        ctt, acc = d["compute_to_target"], d["best_accuracy"]
        reached = math.isfinite(as_float(ctt["median"]))
        x, y = min(as_float(ctt["median"]), budget) / _M, as_float(acc["median"])
        points.append((x, y))
        if e["key"] not in colours:
            others[reached].append((x, y))
            continue
        colour = colours[e["key"]]
        # 25-75% bars as plain lines: the lower median of an even number of seeds may lie below q1
        ax.plot([min(as_float(ctt["q1"]), budget) / _M, min(as_float(ctt["q3"]), budget) / _M], [y, y],
                color=colour, linewidth=0.8)
        ax.plot([x, x], [as_float(acc["q1"]), as_float(acc["q3"])], color=colour, linewidth=0.8)
        # an open marker: the target is not reached within the budget
        ax.plot([x], [y], marker="o", markersize=_width(e, highlighted, 6), color=colour,
                markerfacecolor=colour if reached else "white", gid=_mark_id("pareto", workload, e, highlighted))
        labels.append((x, y, e["label"] + _yours(e, highlighted), colour))
    for reached, xy in others.items():
        if xy:
            ax.scatter(*zip(*xy), s=10, color="0.6", facecolors="0.6" if reached else "none", alpha=0.6, zorder=1)
    front = pareto_front(points)
    if len(front) > 1:
        ax.step([points[i][0] for i in front], [points[i][1] for i in front], where="post", color="0.5",
                linewidth=0.8, linestyle="--", label="Pareto front")
        _legend_outside(ax)
    if w.get("published_reference"):  # this store lacks the reference's runs: the published board's curve
        ref = w["published_reference"]
        band = ref["accuracy_curve"]
        x = [c / _M for c in band["compute"]]
        ax.fill_between(x, band["q1"], band["q3"], color=REFERENCE_COLOUR, alpha=0.12, linewidth=0)
        ax.plot(x, band["median"], color=REFERENCE_COLOUR, linewidth=1.6, linestyle="--",
                label=f"{ref['label']} ({ref['workers']},{ref['trainers']}), reference, published board")
    ax.axhline(w["target_accuracy"], color="0.35", linewidth=0.8, linestyle=":")
    ax.annotate(f"target {w['target_accuracy']:.3f}", (0, w["target_accuracy"]), xytext=(4, 3),
                textcoords="offset points", fontsize=8, color="0.35")
    ax.axvline(budget / _M, color="0.35", linewidth=0.8, linestyle=":")
    ax.annotate("budget", (budget / _M, ax.get_ylim()[1]), xytext=(-4, -4), textcoords="offset points",
                fontsize=8, color="0.35", ha="right", va="top")
    ax.set_xlim(0, budget / _M * 1.05)
    ax.set(xlabel="compute to target (M units; median, bars: 25–75%; open marker: not reached, at the budget)",
           ylabel="best accuracy within budget", title=f"{workload}: best accuracy vs compute")
    ax.grid(alpha=0.3)
    _label_points(fig, ax, labels)
    return _svg(fig, f"pareto-{workload}")


def replay_plot(results: dict, workload: str, plotted: list[dict], colours: dict,
                highlighted: Container[str] = ()) -> str:
    """Two panels: replay ratio and mean off-policiness of each seed (dots) and their median (bar)."""
    n = len(plotted)
    fig, axes = _figure(10, 1.2 + 0.4 * n, ncols=2)
    panels = (("replay_ratio", "replay ratio (samples trained / rollouts generated)", 1.0),
              ("offpolicy_mean", "off-policiness (trainer − rollout version, mean)", 0.0))
    for ax, (key, title, floor) in zip(axes, panels):
        largest = 0.0
        for i, e in enumerate(plotted):
            d, colour, y = e["workloads"][workload], colours[e["key"]], n - 1 - i
            values = [r[key] for r in d["per_run"].values() if r.get(key) is not None]
            ax.scatter(values, [y] * len(values), color=colour, s=16, alpha=0.7, linewidths=0)
            largest = max([largest, *values])
            if d.get(key):
                ax.plot([d[key]["median"]] * 2, [y - 0.3, y + 0.3], color=colour,
                        linewidth=_width(e, highlighted, 2.5))
        if key == "offpolicy_mean":
            _steps_axis(ax, largest)
        ax.axvline(floor, color="0.35", linewidth=0.8, linestyle=":")
        ax.set_yticks(range(n), [e["label"] + _yours(e, highlighted) for e in reversed(plotted)], fontsize=8)
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlim(left=min(floor, ax.get_xlim()[0]) if floor else 0)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    axes[1].tick_params(labelleft=False)
    fig.suptitle(f"{workload}: how the entries reuse rollouts (dots: seeds, bar: median)", fontsize=10)
    return _svg(fig, f"replay-{workload}")


def distributions_plot(results: dict, workload: str, plotted: list[dict], colours: dict,
                       highlighted: Container[str] = ()) -> str:
    """The paper's figure 2: each entry's trained samples by off-policiness and by steps since last use
    ("new": a rollout's first use), pooled over its seeds."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = _figure(10, 3.2, ncols=2)
    panels = (("offpolicy_distribution", "off-policiness (trainer steps behind the rollout's policy)"),
              ("since_last_use_distribution", "steps since the rollout's last use (new = first use)"))
    new_at = -2  # "new" sits apart, left of 0
    for ax, (key, title) in zip(axes, panels):
        has_new, largest = False, 0
        for e in plotted:
            dist, colour = e["workloads"][workload].get(key), colours[e["key"]]
            if not dist:
                continue
            steps = [(int(k), v) for k, v in dist.items() if k != "new"]
            largest = max([largest, *(x for x, _ in steps)])
            if steps:
                ax.step([x for x, _ in steps], [y for _, y in steps], where="mid", color=colour,
                        linewidth=_width(e, highlighted, 1.4), marker="o", markersize=2.5,
                        label=_legend_label(e, workload, highlighted))
            if "new" in dist:
                has_new = True
                ax.plot([new_at], [dist["new"]], marker="o", markersize=5, color=colour, linestyle="none",
                        **({} if steps else {"label": _legend_label(e, workload, highlighted)}))
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("fraction of trained samples", fontsize=8)
        if key != "offpolicy_distribution" or not _steps_axis(ax, largest):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(left=new_at - 1 if has_new else -0.5)
        if has_new:
            ticks = [t for t in ax.get_xticks() if 0 <= t <= ax.get_xlim()[1]]
            ax.set_xticks([new_at] + ticks, ["new"] + [f"{t:g}" for t in ticks])
        ax.grid(alpha=0.3)
    _legend_outside(axes[1])
    fig.suptitle(f"{workload}: how stale and how reused the trained samples are (pooled over seeds)", fontsize=10)
    return _svg(fig, f"distributions-{workload}")


def plotted_entries(results: dict, highlighted: Container[str] = ()) -> list[dict]:
    """The first PLOTTED_ENTRIES by rank, and below them the reference and the highlighted entries (whoever
    highlights an entry wants to see its curve whatever its rank)."""
    entries = results["entries"][:PLOTTED_ENTRIES]
    entries += [e for e in results["entries"][PLOTTED_ENTRIES:] if e["reference"] or e["key"] in highlighted]
    return entries


def entry_colours(plotted: list[dict], highlighted: Container[str] = ()) -> dict[str, str]:
    """Each plotted entry's colour, by key: the same on every plot of the page. The others keep tab10 in rank
    order, so at most 10 of them besides the reference and the highlighted entries."""
    others = [e for e in plotted if not e["reference"] and e["key"] not in highlighted]
    return {e["key"]: REFERENCE_COLOUR if e["reference"] else HIGHLIGHT_COLOUR if e["key"] in highlighted
            else COLOURS[others.index(e) % len(COLOURS)] for e in plotted}
