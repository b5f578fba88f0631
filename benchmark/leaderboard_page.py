"""The leaderboard page, leaderboard/index.html, and a local server for it.

The page is one self-contained static file rendered from the results dict alone (the dict written to
results.json, which LEADERBOARD.md is rendered from too), so table, JSON, markdown and page agree.
Plots are matplotlib SVG inlined in the page, rendered deterministically (fixed id salt, no date):
the same results give the same bytes. The table sorts with a few lines of inline JavaScript. Nothing
is fetched from anywhere, so the page works from file:// as well as from `replaybench leaderboard serve`.
"""

from __future__ import annotations

import html
import io
import math
import signal
from pathlib import Path

from benchmark.leaderboard import LeaderboardError, _compute, _num, _title, table_rows

PLOTTED_ENTRIES = 10  # the plots show the first entries by rank (and the reference); the table lists all
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]  # matplotlib's tab10, one per plotted entry in rank order: at most 10 besides the reference
REFERENCE_COLOUR = "#222222"  # the reference is drawn dashed in near-black, never in an entry's colour
RUNS_OPEN_UP_TO = 40  # the runs table starts folded when it is longer
_M = 1e6  # compute is shown in millions of units


# ---- plots ------------------------------------------------------------------------------------
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


def _value(x) -> float:
    """A results number as a float: "inf" -> inf, None -> nan."""
    if x is None:
        return math.nan
    return math.inf if x == "inf" else float(x)


def _legend_label(e: dict) -> str:
    return f"{e['label']} ({e['workers']},{e['trainers']})" + (", reference" if e["reference"] else "")


def _legend_outside(ax) -> None:
    """The legend right of the axes: inside, it would cover curves and points whichever corner it took."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8, frameon=False)


def curves_plot(results: dict, workload: str, plotted: list[dict], colours: dict) -> str:
    """Accuracy vs compute: each entry's median over seeds, its 25-75% band shaded."""
    w = results["workloads"][workload]
    fig, ax = _figure(10, 4.2)
    for e in plotted:
        band = e["workloads"][workload]["accuracy_curve"]
        x = [c / _M for c in band["compute"]]
        colour = colours[e["key"]]
        ax.fill_between(x, band["q1"], band["q3"], color=colour, alpha=0.18, linewidth=0)
        ax.plot(x, band["median"], color=colour, marker="o", markersize=3, linewidth=1.6,
                linestyle="--" if e["reference"] else "-", label=_legend_label(e))
    ax.axhline(w["target_accuracy"], color="0.35", linewidth=0.8, linestyle=":")
    ax.annotate(f"target {w['target_accuracy']:.3f}", (0, w["target_accuracy"]), xytext=(4, 3),
                textcoords="offset points", fontsize=8, color="0.35")
    ax.set_xlim(0, w["budget"] / _M)
    ax.set(xlabel="compute (M units)", ylabel="eval accuracy",
           title=f"{workload}: accuracy vs compute (median over seeds, band: 25–75%)")
    ax.grid(alpha=0.3)
    if plotted:
        _legend_outside(ax)
    return _svg(fig, f"curves-{workload}")


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


def pareto_plot(results: dict, workload: str, plotted: list[dict], colours: dict) -> str:
    """Best accuracy vs compute-to-target (the budget where the target is never reached), every entry;
    the plotted entries with their 25-75% bars and names, the others as grey dots."""
    w = results["workloads"][workload]
    budget = w["budget"]
    fig, ax = _figure(10, 4.2)
    points, others, labels = [], {True: [], False: []}, []
    for e in results["entries"]:
        d = e["workloads"][workload]
        ctt, acc = d["compute_to_target"], d["best_accuracy"]
        reached = math.isfinite(_value(ctt["median"]))
        x, y = min(_value(ctt["median"]), budget) / _M, _value(acc["median"])
        points.append((x, y))
        if e["key"] not in colours:
            others[reached].append((x, y))
            continue
        colour = colours[e["key"]]
        # 25-75% bars as plain lines: the lower median of an even number of seeds may lie below q1
        ax.plot([min(_value(ctt["q1"]), budget) / _M, min(_value(ctt["q3"]), budget) / _M], [y, y], color=colour,
                linewidth=0.8)
        ax.plot([x, x], [_value(acc["q1"]), _value(acc["q3"])], color=colour, linewidth=0.8)
        # an open marker: the target is not reached within the budget
        ax.plot([x], [y], marker="o", markersize=6, color=colour, markerfacecolor=colour if reached else "white")
        labels.append((x, y, e["label"], colour))
    for reached, xy in others.items():
        if xy:
            ax.scatter(*zip(*xy), s=10, color="0.6", facecolors="0.6" if reached else "none", alpha=0.6, zorder=1)
    front = pareto_front(points)
    if len(front) > 1:
        ax.step([points[i][0] for i in front], [points[i][1] for i in front], where="post", color="0.5",
                linewidth=0.8, linestyle="--", label="Pareto front")
        _legend_outside(ax)
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


def replay_plot(results: dict, workload: str, plotted: list[dict], colours: dict) -> str:
    """Two panels: replay ratio and mean off-policiness of each seed (dots) and their median (bar)."""
    n = len(plotted)
    fig, axes = _figure(10, 1.2 + 0.4 * n, ncols=2)
    panels = (("replay_ratio", "replay ratio (samples trained / rollouts generated)", 1.0),
              ("offpolicy_mean", "off-policiness (trainer − rollout version, mean)", 0.0))
    for ax, (key, title, floor) in zip(axes, panels):
        for i, e in enumerate(plotted):
            d, colour, y = e["workloads"][workload], colours[e["key"]], n - 1 - i
            values = [r[key] for r in d["per_run"].values() if r.get(key) is not None]
            ax.scatter(values, [y] * len(values), color=colour, s=16, alpha=0.7, linewidths=0)
            if d.get(key):
                ax.plot([d[key]["median"]] * 2, [y - 0.3, y + 0.3], color=colour, linewidth=2.5)
        ax.axvline(floor, color="0.35", linewidth=0.8, linestyle=":")
        ax.set_yticks(range(n), [e["label"] for e in reversed(plotted)], fontsize=8)
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlim(left=min(floor, ax.get_xlim()[0]) if floor else 0)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    axes[1].tick_params(labelleft=False)
    fig.suptitle(f"{workload}: how the entries reuse rollouts (dots: seeds, bar: median)", fontsize=10)
    return _svg(fig, f"replay-{workload}")


def plotted_entries(results: dict) -> list[dict]:
    entries = results["entries"][:PLOTTED_ENTRIES]
    entries += [e for e in results["entries"][PLOTTED_ENTRIES:] if e["reference"]]
    return entries


# ---- the page ---------------------------------------------------------------------------------
def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _sort_value(x) -> str:
    """A data-sort attribute: a number the table's script compares numerically (missing: NaN)."""
    v = _value(x)
    return "NaN" if math.isnan(v) else "Infinity" if math.isinf(v) else repr(v)


def _numeric_keys(e: dict, workloads: list[str]) -> dict:
    """Numeric sort keys of the table's columns, by header (columns not listed sort as text)."""
    keys = {"band": e["band"], "rank [95%]": e["rank"],
            "seeds": min(e["workloads"][w]["n_seeds"] for w in workloads),
            "speedup (geo-mean) [95% CI]": e["score"]["speedup_geomean"],
            "perf. profile": e["performance_profile"]}
    keys.update({f"speedup {w}": e["workloads"][w]["speedup"]["median"] for w in workloads})
    if len(workloads) == 1:
        d = e["workloads"][workloads[0]]
        keys.update({"compute-to-target (median [IQR])": d["compute_to_target"]["median"],
                     "best acc (median ± IQR)": d["best_accuracy"]["median"], "AUC": d["auc"]["median"],
                     "pass@k at best": max(d["pass_at_k_at_best"].values(), default=None),
                     "entropy": d["final_entropy"]})
    return keys


def _ranking_table(results: dict) -> str:
    workloads = sorted(results["workloads"])
    header, rows = table_rows(results)
    head = "".join(f'<th scope="col" tabindex="0" title="sort by {_esc(h)}"'
                   + (' aria-sort="ascending"' if h.startswith("rank") else "") + f">{_esc(h)}</th>" for h in header)
    body = []
    for i, (e, row) in enumerate(zip(results["entries"], rows)):
        keys = _numeric_keys(e, workloads)
        cells = []
        for h, text in zip(header, row):
            sort = f' data-sort="{_sort_value(keys[h])}"' if h in keys else ""
            title = ""
            if h == "entry":
                ids = [r for w in workloads for r in e["workloads"][w]["run_ids"]]
                title = f' title="{_esc(e["key"])}; MLflow runs: {_esc(", ".join(ids))}"'
            cells.append(f"<td{sort}{title}>{_esc(text)}</td>")
        cls = "band-odd" if e["band"] % 2 else "band-even"
        body.append(f'<tr class="{cls}" data-rank="{i}">{"".join(cells)}</tr>')
    return (f'<table id="ranking" class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _simple_table(table_id: str, header: list[str], rows: list[list[str]], code_cols=()) -> str:
    head = "".join(f'<th scope="col">{_esc(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f"<td><code>{_esc(c)}</code></td>" if j in code_cols else f"<td>{_esc(c)}</td>"
                                    for j, c in enumerate(row)) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _runs_table(results: dict) -> str:
    """Every scored run, by entry in rank order: the MLflow run id behind each number on the page."""
    rows = []
    for e in results["entries"]:
        for w in sorted(results["workloads"]):
            for run_id, r in e["workloads"][w]["per_run"].items():
                rows.append([e["label"], w, r["seed"], run_id, _compute(r["compute_to_target"]),
                             _num(r["best_accuracy"]), _compute(r["best_compute"]), _num(r["auc"]),
                             _num(r.get("replay_ratio"), "{:.2f}"), _num(r.get("offpolicy_mean"), "{:.2f}")])
    return _simple_table("runs", ["entry", "workload", "seed", "MLflow run id", "compute-to-target",
                                  "best acc", "at compute", "AUC", "replay ratio", "off-policiness"], rows,
                         code_cols=(3,))


SCRIPT = """
(function () {
  // Sort the ranking by a clicked header: numbers by their data-sort value, other columns as text,
  // missing values last, ties kept in rank order. Clicking again reverses the order.
  function key(row, col) {
    var cell = row.cells[col], n = cell.getAttribute("data-sort");
    return n === null ? cell.textContent.trim() : parseFloat(n);
  }
  function compare(a, b, dir) {
    if (typeof a === "number") {
      if (isNaN(a) || isNaN(b)) { return isNaN(a) ? (isNaN(b) ? 0 : 1) : -1; }
      return a === b ? 0 : (a < b ? -dir : dir);
    }
    return dir * a.localeCompare(b);
  }
  var table = document.getElementById("ranking");
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    function sort() {
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        return compare(key(a, col), key(b, col), dir) || (a.getAttribute("data-rank") - b.getAttribute("data-rank"));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { sort(); } });
  });
})();
"""

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1400px;
       padding: 1rem 1.5rem 3rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.45rem; } h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; }
.meta, .note { color: #555; font-size: 0.9rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.6rem 0; }
th, td { border: 1px solid #d4d4d4; padding: 0.25rem 0.45rem; text-align: left; white-space: nowrap; }
th { vertical-align: bottom; white-space: normal; background: #f0f0f0; }
#ranking td { text-align: right; }
#ranking td:nth-child(3), #ranking td:last-child { text-align: left; }
#ranking td:last-child { white-space: normal; min-width: 9rem; }
#not-ranked td, #excluded td:last-child { white-space: normal; }
#ranking th { cursor: pointer; user-select: none; }
#ranking th:hover { background: #e2e8f0; }
#ranking th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: 0.7em; }
#ranking th[aria-sort="descending"]::after { content: " \\25BC"; font-size: 0.7em; }
tr.band-even td { background: #f7f9fc; }
figure { margin: 1rem 0; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.85rem; }
code { font-size: 0.85em; }
details summary { cursor: pointer; margin: 0.5rem 0; }
"""


def render_html(results: dict) -> str:
    """The whole page as one string (plots inlined); the same results give the same bytes."""
    workloads = sorted(results["workloads"])
    plotted = plotted_entries(results)
    others = [e for e in plotted if not e["reference"]]
    colours = {e["key"]: REFERENCE_COLOUR if e["reference"] else COLOURS[others.index(e) % len(COLOURS)]
               for e in plotted}
    mlflow = results["mlflow"]
    parts = [f"<h1>{_esc(_title(results))}</h1>",
             f'<p class="meta">Generated {_esc(results["generated"])} from MLflow (<code>{_esc(mlflow["tracking_uri"])}'
             f'</code>, experiments {_esc(", ".join(mlflow["experiments"]))}; code {_esc(results["code_version"])}) '
             'by <code>replaybench leaderboard build</code>. The same numbers are in '
             '<a href="results.json">results.json</a> and <a href="LEADERBOARD.md">LEADERBOARD.md</a>; each names '
             'the MLflow run ids it comes from (<a href="#runs-section">runs below</a>). '
             'Rules: <a href="README.md">README.md</a>.</p>',
             "<h2>Ranking</h2>",
             '<p class="note">speedup = the reference\'s compute-to-target / the entry\'s (median over seeds); '
             "ranked by it; entries in one band are not separable at 95%. Click a column header to sort.</p>",
             f'<div class="scroll">{_ranking_table(results)}</div>']
    if len(workloads) > 1:
        parts.append('<p class="note">Plots per workload: ' + " · ".join(
            f'<a href="#workload-{_esc(w)}">{_esc(w)}</a>' for w in workloads) + ".</p>")
    for w in workloads:
        info = results["workloads"][w]
        parts += [f'<h2 id="workload-{_esc(w)}">{_esc(w)} (version {_esc(info["version"])})</h2>',
                  f'<p class="note">Budget {_compute(info["budget"])} units; target accuracy '
                  f'{info["target_accuracy"]:.3f}, frozen in <code>{_esc(info["target_file"])}</code> from the '
                  f'reference runs {_esc(", ".join(info["reference_run_ids"]))}; reference compute-to-target '
                  f'{_compute(info["reference_compute_to_target"])}.'
                  + (f" The plots show the first {PLOTTED_ENTRIES} entries by rank." if len(results["entries"])
                     > len(plotted) else "") + "</p>"]
        if not plotted:
            parts.append("<p>No ranked entry yet: nothing to plot.</p>")
            continue
        for kind, plot, caption in (
                ("curves", curves_plot, "Evaluation accuracy against compute used: the median over seeds of each "
                                        "entry, the shaded band from the 25th to the 75th percentile."),
                ("pareto", pareto_plot, "Best accuracy within the budget against the compute to reach the target "
                                        "accuracy (medians, bars from the 25th to the 75th percentile)."),
                ("replay", replay_plot, "Replay ratio (each rollout's average number of uses) and mean "
                                        "off-policiness (policy versions between generating a sample and "
                                        "training on it), per seed from its summary.json.")):
            parts.append(f'<figure class="plot" id="{kind}-{_esc(w)}">{plot(results, w, plotted, colours)}'
                         f"<figcaption>{_esc(caption)}</figcaption></figure>")
    parts.append("<h2>Not ranked</h2>")
    if results["not_ranked"]:
        parts.append('<div class="scroll">' + _simple_table(
            "not-ranked", ["entry", "reason", "MLflow runs"],
            [[n["key"], n["reason"], ", ".join(n["run_ids"])] for n in results["not_ranked"]]) + "</div>")
    else:
        parts.append("<p>None.</p>")
    parts.append("<h2>Excluded runs</h2>")
    if results["excluded_runs"]:
        parts.append('<div class="scroll">' + _simple_table(
            "excluded", ["workload", "strategy", "seed", "MLflow run id", "reason"],
            [[x["workload"], x["strategy"], x["seed"], x["run_id"], x["reason"]] for x in results["excluded_runs"]],
            code_cols=(3,)) + "</div>")
    else:
        parts.append("<p>None.</p>")
    for w, info in results["unscored_workloads"].items():
        parts.append(f'<p class="note">Workload {_esc(w)}: {info["runs"]} runs not scored (no target); run '
                     f'<code>{_esc(info["fix"])}</code>.</p>')
    n_runs = sum(len(e["workloads"][w]["per_run"]) for e in results["entries"] for w in workloads)
    details = "<details open>" if n_runs <= RUNS_OPEN_UP_TO else "<details>"
    parts += ['<h2 id="runs-section">MLflow runs behind each entry</h2>',
              f'<p class="note">Look a run up by its id in MLflow (<code>mlflow ui</code> on '
              f'<code>{_esc(mlflow["tracking_uri"])}</code>): its summary.json holds the evaluation curve these '
              "numbers come from.</p>",
              f'{details}<summary>{n_runs} runs</summary><div class="scroll">{_runs_table(results)}</div>'
              "</details>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<link rel="icon" href="data:,">\n'  # no favicon request
            f"<title>{_esc(_title(results))}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(parts) + f"\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


# ---- serving ----------------------------------------------------------------------------------
def serve(directory: Path, port: int = 8000) -> int:
    """Serve the folder on 127.0.0.1 until Ctrl-C."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    directory = Path(directory)
    if not (directory / "index.html").is_file():
        raise LeaderboardError(f"{directory / 'index.html'} is missing: run `replaybench leaderboard build` first "
                               "(or pass --dir FOLDER)")
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), partial(SimpleHTTPRequestHandler, directory=str(directory)))
    except OSError as exc:
        raise LeaderboardError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}): pass another --port, or "
                               "--port 0 for a free one") from exc
    def stop(signum, frame):
        raise KeyboardInterrupt

    # A process started in the background inherits SIGINT ignored, so Python installs no Ctrl-C handler:
    # install ours, and let SIGTERM (a service manager's stop) end the server the same clean way.
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with server:
            print(f"serving {directory} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                print("stopped", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
