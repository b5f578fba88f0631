"""The leaderboard page, leaderboard/index.html.

The page is one self-contained static file rendered from the results dict alone (the dict written to
results.json, which LEADERBOARD.md is rendered from too), so table, JSON, markdown and page agree.
Plots (plots.py) are SVG inlined in the page: the same results give the same bytes. The table sorts with a
few lines of inline JavaScript. Nothing is fetched from anywhere, so the page works from file:// as well as
from `replaybench leaderboard serve`.
"""

from __future__ import annotations

import html
import math

from benchmark.leaderboard.plots import (
    HIGHLIGHT_COLOUR,
    PLOTTED_ENTRIES,
    as_float,
    curves_plot,
    distributions_plot,
    entry_colours,
    pareto_plot,
    plotted_entries,
    replay_plot,
)
from benchmark.leaderboard.published import shared_path
from benchmark.leaderboard.render import (
    CONFIRMATION_COLUMNS,
    FINAL_V3,
    VARIANT_COLUMNS,
    VERDICT_V3,
    YOURS,
    campaign_phase_label,
    campaign_words,
    confirmation_rows,
    entry_counts,
    excluded_groups,
    format_compute,
    format_number,
    highlighted_keys,
    is_verdict_column,
    lacks_reference,
    no_verdict_note,
    ranking_words,
    replacement_words,
    rules_file,
    rules_version,
    speedup_column,
    table_rows,
    title,
    variant_rows,
)

RUNS_OPEN_UP_TO = 40  # the runs table starts folded when it is longer


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _sort_value(x) -> str:
    """A data-sort attribute: a number the table's script compares numerically (missing: NaN)."""
    v = as_float(x)
    return "NaN" if math.isnan(v) else "Infinity" if math.isinf(v) else repr(v)


def _score_order(score: dict) -> float:
    """The score column sorts as the ranking does: every entry that reaches the target (speedup > 0) above
    every entry that does not (best / target - 2 < 0, in their order)."""
    return score["speedup_geomean"] if score["reached"] else score["best_vs_target"] - 2.0


def _numeric_keys(e: dict, workloads: list[str]) -> dict:
    """Numeric sort keys of the table's columns, by header (columns not listed sort as text)."""
    keys = {"band": e["band"], "rank [95%]": e["rank"],
            "seeds": min(e["workloads"][w]["n_seeds"] for w in workloads),
            "speedup (geo-mean) [95% CI]": _score_order(e["score"]),
            "perf. profile": e["performance_profile"]}
    keys.update({speedup_column(w): e["workloads"][w]["speedup"]["median"] if e["workloads"][w]["reached"] else None
                 for w in workloads})
    if len(workloads) == 1:
        d = e["workloads"][workloads[0]]
        keys.update({"compute-to-target (median [IQR])": d["compute_to_target"]["median"],
                     "best acc (median curve [IQR])": d["best_accuracy"]["median"], "AUC": d["auc"]["median"],
                     "pass@k at best": max(d["pass_at_k_at_best"].values(), default=None),
                     "entropy": d["final_entropy"]})
    return keys


# The ranking's columns by class, not position: the style holds whichever columns a board has (a store without
# the reference shows no band, rank or profile; a board of several workloads a speedup per workload).
COLUMN_CLASSES = {"band": "band", "rank [95%]": "rank", "entry": "entry", "(W,T)": "split", "seeds": "seeds",
                  "speedup (geo-mean) [95% CI]": "speedup", "perf. profile": "profile",
                  "compute-to-target (median [IQR])": "to-target", "best acc (median curve [IQR])": "best",
                  "AUC": "auc", "pass@k at best": "pass-k", "entropy": "entropy", "flags": "flags",
                  VERDICT_V3: "verdict", FINAL_V3: "final"}


def _column_class(header: str) -> str:
    return "c-" + COLUMN_CLASSES.get(header, "verdict" if is_verdict_column(header) else "workload-speedup")


def _ranking_table(results: dict, highlighted: set[str]) -> str:
    workloads = sorted(results["workloads"])
    header, rows = table_rows(results)
    head = "".join(f'<th scope="col" class="{_column_class(h)}" tabindex="0" title="sort by {_esc(h)}"'
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
                title = f' title="MLflow runs: {_esc(", ".join(ids))}"'
                text += YOURS if e["key"] in highlighted else ""  # the mark in words, for a screen reader too
            cells.append(f'<td class="{_column_class(h)}"{sort}{title}>{_esc(text)}</td>')
        cls = ("band-odd" if e["band"] % 2 else "band-even") + (" highlighted" if e["key"] in highlighted else "")
        body.append(f'<tr class="{cls}" data-rank="{i}">{"".join(cells)}</tr>')
    return (f'<table id="ranking" class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _plotted_note(results: dict, plotted: list[dict], highlighted: set[str]) -> str:
    """Which entries the plots show, when not all of them: the first by rank, and the highlighted ones below."""
    if len(results["entries"]) == len(plotted):
        return ""
    below = [e for e in plotted[PLOTTED_ENTRIES:] if e["key"] in highlighted]
    return (f" The plots show the first {PLOTTED_ENTRIES} entries by rank"
            + "".join(f" and {_esc(e['label'])}{YOURS} (rank {e['rank']}, thicker line)" for e in below) + ".")


def _simple_table(table_id: str, header: list[str], rows: list[list], code_cols=(), runs_folder=None) -> str:
    """code_cols hold run ids: with runs_folder (a published board), each a link to its shipped run. Any other
    cell may be (text, href): a link."""
    def cell(j, c):
        text, href = c if isinstance(c, tuple) else (c, None)
        inner = f"<code>{_esc(text)}</code>" if j in code_cols else _esc(text)
        if j in code_cols and runs_folder:
            href = f"{runs_folder}/{text}/"
        return f'<td><a href="{_esc(href)}">{inner}</a></td>' if href else f"<td>{inner}</td>"

    head = "".join(f'<th scope="col">{_esc(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(cell(j, c) for j, c in enumerate(row)) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _excluded_sections(results: dict) -> list[str]:
    """The runs left out, one section per why (held out, older version, interrupted, ...), each folded: the
    calibration runs and old versions of a large store would bury everything below them."""
    sections = []
    for i, (why, runs) in enumerate(excluded_groups(results)):
        table = _simple_table(f"excluded-{i}", ["workload", "entry", "seed", "MLflow run id", "reason"],
                              [[x["workload"], x.get("name", x["strategy"]), x["seed"], x["run_id"], x["reason"]]
                               for x in runs], code_cols=(3,), runs_folder=results.get("runs_folder"))
        sections.append(f'<details class="excluded"><summary>{_esc(why)}: {len(runs)} run'
                        f'{"s" if len(runs) > 1 else ""} ({_esc(entry_counts(runs))})</summary>'
                        f'<div class="scroll">{table}</div></details>')
    return sections


RATIO_COLUMNS = (("clip_fraction_mean", "clip fraction", "{:.4f}"), ("ratio_mean", "mean ratio", "{:.4f}"),
                 ("ratio_max", "max ratio", "{:.2f}"), ("ess_fraction_mean", "effective sample size", "{:.4f}"),
                 ("recomputed_behaviour_fraction", "behaviour recomputed", "{:.3f}"))


def _ratio_table(results: dict, workload: str) -> str:
    """How far off-policy each entry trains: its runs' importance-ratio statistics (medians over seeds of the
    per-step means; the maximum ratio over the run), and the share of trained samples whose behaviour log-probs
    were taken from the current policy (clipping off for them). Empty when no run records them."""
    rows = [[e["label"]] + [format_number(stats[key], fmt) for key, _, fmt in RATIO_COLUMNS]
            for e in results["entries"] if (stats := e["workloads"][workload].get("ratio_statistics"))]
    if not rows:
        return ""
    return (f'<h2 id="ratios-{_esc(workload)}">{_esc(workload)}: importance ratios</h2>'
            '<p class="note">Per entry, the median over seeds of each run\'s mean over trainer steps (the maximum '
            "ratio: over the run). Effective sample size: Kish's, mean(r)² / mean(r²), as a fraction of the "
            "tokens (1 on-policy). Behaviour recomputed: the share of trained samples whose behaviour "
            "log-probabilities the trainer took from the current policy, as a strategy may ask (RLEP): the ratio "
            "is then 1 and clipping off for them.</p>"
            + _simple_table("ratios", ["entry"] + [name for _, name, _ in RATIO_COLUMNS], rows))


def _runs_table(results: dict) -> str:
    """Every scored run, by entry in rank order: the MLflow run id behind each number on the page; on a
    published board the entry links to its strategy file and the run id to its folder."""
    rows = []
    runs_folder = results.get("runs_folder")
    for e in results["entries"]:
        # the shipped strategy file, stored by its SHA-256 (an entry is one strategy file); a strategy is a .py
        entry = ((e["label"], f'{runs_folder}/{shared_path("strategy.py", e["strategy_sha256"])}')
                 if runs_folder and e.get("strategy_sha256") else e["label"])
        for w in sorted(results["workloads"]):
            for run_id, r in e["workloads"][w]["per_run"].items():
                rows.append([entry, w, r["seed"], run_id, format_compute(r["compute_to_target"]),
                             format_number(r["best_accuracy"]), format_compute(r["best_compute"]),
                             format_number(r["auc"]), format_number(r.get("replay_ratio"), "{:.2f}"),
                             format_number(r.get("offpolicy_mean"), "{:.2f}")])
    return _simple_table("runs", ["entry", "workload", "seed", "MLflow run id", "compute-to-target",
                                  "best acc", "at compute", "AUC", "replay ratio", "off-policiness"], rows,
                         code_cols=(3,), runs_folder=runs_folder)


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

# Only on a page that highlights an entry (`build --highlight`): the published board's bytes stay as they are.
HIGHLIGHT_STYLE = f"""
tr.highlighted td {{ font-weight: 600; background: #fbeaf4; }}
tr.highlighted td:first-child {{ border-left: 4px solid {HIGHLIGHT_COLOUR}; }}
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
#ranking td.c-entry, #ranking td.c-flags { text-align: left; }
/* the long cells wrap, so that the whole ranking fits the page's width */
#ranking { font-size: 0.82rem; }
#ranking td.c-entry { white-space: normal; min-width: 10rem; }
#ranking td.c-flags { white-space: normal; min-width: 7rem; }
#ranking td.c-speedup { white-space: normal; min-width: 10.5rem; }
#ranking td.c-pass-k { white-space: normal; min-width: 4.5rem; }
#ranking td.c-workload-speedup, #ranking td.c-verdict { white-space: normal; min-width: 6.5rem; }
#not-ranked td, details.excluded td:last-child { white-space: normal; }
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
@media (max-width: 700px) {  /* a phone: the ranking's key columns in view, plots at a readable scale */
  body { padding: 0.5rem 0.6rem 2rem; }
  #ranking .c-split, #ranking .c-seeds, #ranking .c-profile { display: none; }
  #ranking td.c-entry, #ranking td.c-speedup { white-space: normal; min-width: 6rem; }
  th, td { padding: 0.2rem 0.3rem; }
  figure { overflow-x: auto; }
  figure svg { max-width: none; width: 760px; }
}
"""


def _level_table(results: dict, workload: str) -> str:
    """Rules v3: each entry's speedup and interval at targets of each level x the reference's best accuracy
    ("not reached" where most of its seeds miss that level)."""
    entries = [e for e in results["entries"] if e["workloads"][workload].get("level_sensitivity")]
    if not entries:
        return ""
    levels = [lv["level"] for lv in entries[0]["workloads"][workload]["level_sensitivity"]]
    head = "".join(f'<th scope="col">{level:.0%}</th>' for level in levels)
    rows = []
    for e in entries:
        cells = "".join(
            f"<td>{lv['speedup']:.2f} [{lv['ci95'][0]:.2f}, {lv['ci95'][1]:.2f}]</td>" if lv["reached"]
            else "<td>not reached</td>" for lv in e["workloads"][workload]["level_sensitivity"])
        rows.append(f"<tr><td>{_esc(e['label'])}</td>{cells}</tr>")
    return (f'<h3 id="levels-{_esc(workload)}">{_esc(workload)}: speedup by target level</h3>'
            '<p class="note">The speedup and its interval with the target at each fraction of the reference\'s '
            "best accuracy (the board's target is 98%): a verdict that holds at one level only depends on the "
            "target.</p>"
            f'<div class="scroll"><table class="levels"><thead><tr><th scope="col">entry</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _ranking_note(results: dict) -> str:
    if lacks_reference(results):  # no verdict the store cannot make: the entries' own numbers only
        return (f'<p class="note"><strong>{_esc(no_verdict_note(results))}.</strong> speedup = the reference\'s '
                "frozen compute-to-target / the entry's (median over seeds). Click a column header to sort.</p>")
    return f'<p class="note">{_esc(ranking_words(results))}. Click a column header to sort.</p>'


def render_html(results: dict, highlight: str | None = None) -> str:
    """The whole page as one string (plots inlined); the same results give the same bytes. The entries named
    `highlight` ("yours") are marked in the table and plotted whatever their rank."""
    workloads = sorted(results["workloads"])
    mine = highlighted_keys(results, highlight)
    plotted = plotted_entries(results, mine)
    colours = entry_colours(plotted, mine)
    mlflow = results["mlflow"]
    parts = [f"<h1>{_esc(title(results))}</h1>",
             f'<p class="meta">Generated {_esc(results["generated"])} from {_store_words(results)} '
             f'(experiments {_esc(", ".join(mlflow["experiments"]))}; code {_esc(results["code_version"])}) '
             'by <code>replaybench leaderboard build</code>. The same numbers are in '
             '<a href="results.json">results.json</a> and <a href="LEADERBOARD.md">LEADERBOARD.md</a>; each names '
             'the MLflow run ids it comes from (<a href="#runs-section">runs below</a>). '
             f"Rules: {_rules_link(results)}."
             + replacement_words(results, lambda text, path: f'<a href="{_esc(path)}">{_esc(text)}</a>') + "</p>",
             *([f'<p class="meta">{_esc(campaign_words(results))} (<a href="#campaign-runs">its runs</a>).</p>']
               if campaign_words(results) else []),
             "<h2>Ranking</h2>", _ranking_note(results),
             f'<div class="scroll">{_ranking_table(results, mine)}</div>']
    parts += [_level_table(results, w) for w in workloads if rules_version(results) == 3]
    if len(workloads) > 1:
        parts.append('<p class="note">Plots per workload: ' + " · ".join(
            f'<a href="#workload-{_esc(w)}">{_esc(w)}</a>' for w in workloads) + ".</p>")
    for w in workloads:
        info = results["workloads"][w]
        parts += [f'<h2 id="workload-{_esc(w)}">{_esc(w)} (version {_esc(info["version"])})</h2>',
                  f'<p class="note">Budget {format_compute(info["budget"])} units; target accuracy '
                  f'{info["target_accuracy"]:.3f}, frozen in <code>{_esc(info["target_file"])}</code> from the '
                  f'reference runs {_esc(", ".join(info["reference_run_ids"]))}; reference compute-to-target '
                  f'{format_compute(info["reference_compute_to_target"])}. Those runs are on held-out seeds, '
                  "never scored: a target set by the scored runs themselves would favour the reference by the "
                  "luck of its own noisy evaluations (leaderboard/README.md)." + _plotted_note(results, plotted, mine)
                  + "</p>"]
        if info.get("published_reference"):
            ref = info["published_reference"]
            parts.append(f'<p class="note">This store lacks the reference runs; the dashed curve is the reference '
                         f'of the published board (<code>{_esc(ref["source"])}</code>, runs '
                         f'{_esc(", ".join(ref["run_ids"]))}), for comparison.</p>')
        previews = [p for p in results.get("previews", []) if p["workload"] == w]
        if not plotted and not info.get("published_reference") and not previews:
            parts.append("<p>No ranked entry yet: nothing to plot.</p>")
            continue
        for kind, plot, caption in (
                ("curves", curves_plot, "Evaluation accuracy against compute used: the median over seeds of each "
                                        "entry, the shaded band from the 25th to the 75th percentile."),
                ("pareto", pareto_plot, "Best accuracy within the budget against the compute to reach the target "
                                        "accuracy (medians, bars from the 25th to the 75th percentile)."),
                ("replay", replay_plot, "Replay ratio (each rollout's average number of uses) and mean "
                                        "off-policiness (policy versions between generating a sample and "
                                        "training on it), per seed from its summary.json."),
                ("distributions", distributions_plot, "The distributions behind those means, as the paper's "
                                                      "figure 2: the fraction of trained samples at each "
                                                      "off-policiness and at each number of steps since the "
                                                      "rollout's last use, pooled over the seeds.")):
            if not plotted and kind != "curves":
                continue
            if kind == "distributions" and not any(e["workloads"][w].get("offpolicy_distribution") for e in plotted):
                continue  # runs recorded before the distributions were
            parts.append(f'<figure class="plot" id="{kind}-{_esc(w)}">{plot(results, w, plotted, colours, mine)}'
                         f"<figcaption>{_esc(caption)}</figcaption></figure>")
    parts.append("<h2>Not ranked</h2>")
    if results["not_ranked"]:
        parts.append('<div class="scroll">' + _simple_table(
            "not-ranked", ["entry", "reason", "MLflow runs"],
            [[n["strategy"], n["reason"], ", ".join(n["run_ids"])] for n in results["not_ranked"]]) + "</div>")
    else:
        parts.append("<p>None.</p>")
    parts.append("<h2>Excluded runs</h2>")
    parts += _excluded_sections(results) or ["<p>None.</p>"]
    if results.get("variants"):
        parts.append('<h2 id="variants">Variants, for the findings</h2><p class="note">Entries at another split or '
                     "buffer size, each against the reference's scored runs on the same seeds, corrected together; "
                     "never ranked.</p>" + _simple_table("variants", list(VARIANT_COLUMNS), variant_rows(results)))
    if results.get("confirmation"):
        parts.append('<h2 id="confirmation">Confirmation on fresh seeds</h2><p class="note">Each confirmed entry\'s '
                     "claim against the reference, tested again on the confirmation seeds alone by the rule fixed "
                     "before those runs (docs/protocols/confirmation.md).</p>"
                     + _simple_table("confirmation", list(CONFIRMATION_COLUMNS), confirmation_rows(results)))
    if results.get("campaign_runs"):
        by_phase = results["campaign_runs"]
        parts.append('<h2 id="campaign-runs">Every run of the campaigns, by what it was for</h2>'
                     + (f'<p class="note">{_esc(campaign_words(results))}.</p>' if campaign_words(results) else "")
                     + _simple_table("campaign-phases", ["campaign / phase", "runs"],
                                     [[campaign_phase_label(results, phase), str(len(ids))]
                                      for phase, ids in by_phase.items()]))
        # hundreds of ids a phase: each phase's folded, as the excluded runs are
        parts += [f'<details class="campaign-phase"><summary>{_esc(campaign_phase_label(results, phase))}: '
                  f'{len(ids)} run{"s" if len(ids) > 1 else ""}</summary><div class="scroll">'
                  + _simple_table(f"campaign-runs-{i}", ["MLflow run"], [[rid] for rid in ids], code_cols=(0,),
                                  runs_folder=results.get("runs_folder")) + "</div></details>"
                  for i, (phase, ids) in enumerate(by_phase.items())]
    for w, info in results["unscored_workloads"].items():
        then = f'run <code>{_esc(info["fix"])}</code>' if info["fix"] else _esc(info["why"])
        parts.append(f'<p class="note">Workload {_esc(w)}: {info["runs"]} runs not scored (no target); {then}.</p>')
    if any(info.get("run_ids") for info in results["unscored_workloads"].values()):
        parts.append('<details><summary>The runs of the workloads without a target</summary><div class="scroll">'
                     + _simple_table("unscored-runs", ["workload", "MLflow run"],
                                     [[w, rid] for w, info in results["unscored_workloads"].items()
                                      for rid in info.get("run_ids", [])], code_cols=(1,),
                                     runs_folder=results.get("runs_folder"))
                     + "</div></details>")
    parts += [_ratio_table(results, w) for w in workloads]
    n_runs = sum(len(e["workloads"][w]["per_run"]) for e in results["entries"] for w in workloads)
    details = "<details open>" if n_runs <= RUNS_OPEN_UP_TO else "<details>"
    parts += ['<h2 id="runs-section">MLflow runs behind each entry</h2>',
              f'<p class="note">{_lookup_words(results)}</p>',
              f'{details}<summary>{n_runs} runs</summary><div class="scroll">{_runs_table(results)}</div>'
              "</details>"]
    return _document(title(results), parts, highlighting=bool(mine))


def _store_words(results: dict) -> str:
    """Where the runs are, for this page's reader: a published board's shipped folder (the builder's own store
    path means nothing to anyone else), a local board's MLflow store."""
    if results.get("runs_folder"):
        return (f'the runs shipped in <a href="{_esc(results["runs_folder"])}/">{_esc(results["runs_folder"])}/</a> '
                "(<code>replaybench leaderboard import-runs</code> loads them into your MLflow store)")
    return f'MLflow (<code>{_esc(results["mlflow"]["tracking_uri"])}</code>)'


def _lookup_words(results: dict) -> str:
    folder = results.get("runs_folder")
    if folder:
        return (f'Each run id links to its folder in <a href="{_esc(folder)}/">{_esc(folder)}/</a>, whose summary.json '
                "holds the evaluation curve these numbers come from; <code>replaybench leaderboard import-runs</code> "
                "loads them all into your MLflow store (then <code>mlflow ui</code>).")
    return (f'Look a run up by its id in MLflow (<code>mlflow ui</code> on '
            f'<code>{_esc(results["mlflow"]["tracking_uri"])}</code>): its summary.json holds the evaluation curve '
            "these numbers come from.")


def _rules_link(results: dict) -> str:
    """The scoring rules: beside a published board; from a local one, the checkout's copy."""
    rules = rules_file(results)
    return f'<a href="{_esc(rules)}">README.md</a>' if rules else "<code>leaderboard/README.md</code>"


def _document(page_title: str, parts: list[str], highlighting: bool) -> str:
    """The HTML document around the page's sections: its style (with the highlight's only when it has one)
    and the table's script."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<link rel="icon" href="data:,">\n'  # no favicon request
            f"<title>{_esc(page_title)}</title>\n<style>{STYLE}{HIGHLIGHT_STYLE if highlighting else ''}</style>\n"
            "</head>\n<body>\n" + "\n".join(parts) + f"\n<script>{SCRIPT}</script>\n</body>\n</html>\n")

