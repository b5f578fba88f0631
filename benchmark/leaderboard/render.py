"""The leaderboard as text: the terminal table and LEADERBOARD.md, both from the same rows (table_rows), and
the cell formats the page uses too."""

from __future__ import annotations

import math
import posixpath


def format_number(x, fmt="{:.3f}") -> str:
    """A number as the tables show it: undefined (None) as "-", never reached (inf) as "∞"."""
    if x is None:
        return "-"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return fmt.format(x)


def format_compute(x) -> str:
    """Compute units, short: 840k, 1.32M; None as "-", inf as "∞"."""
    if x is None or math.isinf(x):
        return format_number(x)
    return f"{x / 1e6:.2f}M" if abs(x) >= 1e6 else f"{x / 1e3:.0f}k" if abs(x) >= 1e3 else f"{x:.0f}"


def format_score(score: dict, accuracy: str = "best") -> str:
    """The primary score cell: the speedup with its interval, or "not reached" with the accuracy that orders the
    entries that miss the target (rules v2: best, v3: final) / target."""
    if score["reached"]:
        lo, hi = score["ci95"]
        return f"{format_number(score['speedup_geomean'])} [{format_number(lo)}, {format_number(hi)}]"
    lo, hi = score["best_vs_target_ci95"]
    return f"not reached: {accuracy} {score['best_vs_target']:.3f}× target [{lo:.3f}, {hi:.3f}]"


def format_workload_speedup(record: dict, with_interval: bool = False) -> str:
    if not record["reached"]:
        return "not reached"
    lo, hi = record["speedup"]["ci95"]
    point = format_number(record["speedup"]["median"])
    return f"{point} [{format_number(lo)}, {format_number(hi)}]" if with_interval and lo is not None else point


def rules_version(results: dict) -> int:
    """The scoring rules a results dict was built under."""
    return results.get("rules", {}).get("version", 2)


def title(results: dict) -> str:
    ws = ", ".join(f"{w} v{d['version']} (target acc {d['target_accuracy']:.3f})"
                   for w, d in sorted(results["workloads"].items()))
    track = f", track {results['track']}" if results["track"] else ""
    rules = ", scoring rules v3" if rules_version(results) == 3 else ""
    return f"ReplayBench leaderboard: {ws}{track}{rules}"


def campaign_words(results: dict) -> str | None:
    """Which campaign made the board, on what, and how far it is (None: a board not made by one campaign)."""
    c = results.get("campaign")
    if not c:
        return None
    words = (f"Made by the campaign {c['name']} ({c['file']}): engine release "
             f"{c['release'][:12]}, {c['kernels']} CPU kernels, scoring rules v{c['rules']}, {c['seeds_per_arm']} "
             f"scored seeds per arm; of the {c['runs_made']} runs it had started when this board was built, "
             f"{c['runs_finished']} finished and the others stopped before their end (interrupted or failed), none "
             "of them scored")
    words += "".join(f"; it supersedes the campaign {name}: {why}" for name, why in c["supersedes"].items())
    if c["runs_foreign"]:
        words += (f"; {len(c['runs_foreign'])} runs tagged with it were made by another engine or other kernels, "
                  "and are never scored")
    return words


CONFIRMATION_COLUMNS = ("workload", "entry", "scored: speedup [95%], PoI", "scored verdict",
                        "confirmation: speedup [95%], PoI", "Holm-corrected p", "estimate inside scored interval",
                        "verdict")


def confirmation_rows(results: dict) -> list[list[str]]:
    """The confirmation table (docs/protocols/confirmation.md), one row per confirmed entry and workload: both
    speedups with their intervals and probabilities of improvement, as the protocol asks."""
    def speedup(d):
        return f"{format_number(d['speedup'], '{:.2f}')} [{format_number(d['ci95'][0], '{:.2f}')}, " \
               f"{format_number(d['ci95'][1], '{:.2f}')}], PoI {d['poi']:.2f}"
    return [[r["workload"], r["entry"], speedup(r["scored"]), r["scored"]["verdict"], speedup(r["confirmation"]),
             "-" if r["confirmation"]["adjusted_p_value"] is None else f"{r['confirmation']['adjusted_p_value']:.3f}",
             "yes" if r["confirmation"]["inside_scored_interval"] else "no",
             r["verdict"]] for r in results.get("confirmation", [])]


VARIANT_COLUMNS = ("workload", "variant (never ranked)", "replay ratio", "speedup [95%]", "vs reference (corrected p)",
                   "best acc (median curve)")


def variant_rows(results: dict) -> list[list[str]]:
    """The campaign's variants against the reference (leaderboard/variants.py)."""
    return [[v["workload"], v["variant"], format_number(v["replay_ratio"], "{:.2f}"),
             f"{format_number(v['speedup'], '{:.2f}')} [{format_number(v['ci95'][0], '{:.2f}')}, "
             f"{format_number(v['ci95'][1], '{:.2f}')}]", f"{v['verdict']} ({v['adjusted_p_value']:.3f})",
             f"{v['best_accuracy']['median']:.3f}"] for v in results.get("variants", [])]


def campaign_phase_label(results: dict, phase: str) -> str:
    """A campaign run's "campaign/phase", marked when a committed campaign supersedes that one."""
    by = results.get("superseded_campaigns", {}).get(phase.split("/")[0])
    return f"{phase} (superseded by {by['by']})" if by else phase


def highlighted_keys(results: dict, name: str | None) -> set[str]:
    """The keys of the entries `name` picks out ("your" entry, marked on the page and in the table): each entry
    whose name, label or key it is; a submission resubmitted with other code or settings is several entries."""
    return {e["key"] for e in results["entries"] if name in (e["name"], e["label"], e["key"])} if name else set()


YOURS = " (yours)"  # the marker of a highlighted entry, in words: it reads without colour or bold


WIDE_TABLE = 170  # columns the whole table needs
NARROW_COLUMNS = ("band", "rank [95%]", "entry", "(W,T)", "speedup (geo-mean) [95% CI]")
# the columns that order entries against each other: shown only beside the reference
VERDICT_V3 = "vs reference (corrected p)"  # rules v3's columns
FINAL_V3 = "final acc (last 20% [95%])"
VERDICT_COLUMNS = ("band", "rank [95%]", "perf. profile", VERDICT_V3)
IMPORT_RUNS = "replaybench leaderboard import-runs"  # loads leaderboard/runs/, the published board's runs


def setting_of(e: dict, workload: str) -> dict:
    """What the entry ran with on the workload: its split, parameters and open-track choices (a campaign's tuning
    may pick each workload's apart: then the workload's record holds them)."""
    return e["workloads"][workload].get("setting") or {k: e[k] for k in ("workers", "trainers", "params", "open_track")}


def split_text(e: dict, workload: str | None = None) -> str:
    """The entry's (W,T) on the workload; without one, its split, or each workload's in the board's order where
    they differ."""
    if workload is None and e["workers"] is None:
        return " · ".join(split_text(e, w) for w in sorted(e["workloads"]))
    s = e if workload is None else setting_of(e, workload)
    return f"({s['workers']},{s['trainers']})"


def split_note(results: dict) -> str | None:
    """What "(W,T) a · b" means, on a board where it appears."""
    if not any(e["workers"] is None for e in results["entries"]):
        return None
    return (f"(W,T) a · b: the split its tuning picked on each workload, in the order "
            f"{' · '.join(sorted(results['workloads']))}")


def _split_note_lines(results: dict) -> list[str]:
    """split_note as a paragraph under a markdown table, where it applies."""
    note = split_note(results)
    return ["", note + "."] if note else []


def speedup_column(workload: str) -> str:
    """A board of several workloads: the entry's speedup on one of them."""
    return f"speedup {workload}"


def verdict_column(workload: str) -> str:
    """A board of several workloads: the comparison with the reference on one of them."""
    return f"vs reference on {workload} (corrected p)"


def is_verdict_column(header: str) -> bool:
    return header in VERDICT_COLUMNS or header.startswith("vs reference on ")


def lacks_reference(results: dict) -> bool:
    """Entries without the reference's scored runs beside them (a fresh clone's store): a rank, a band or a
    performance profile would only order them among themselves, so the first entry would read as band 1."""
    return bool(results["entries"]) and not any(e["reference"] for e in results["entries"])


def no_verdict_note(results: dict) -> str:
    seeds = "; ".join(f"{w} seeds {', '.join(map(str, d['scored_seeds']))}"
                      for w, d in sorted(results["workloads"].items()))
    return (f"no rank, band or performance profile: this store holds no scored runs of the reference "
            f"({results['rules']['reference']} on {seeds}) to compare with; run `{IMPORT_RUNS}`, then "
            "`replaybench leaderboard`")


def side_of_one(lo: float, hi: float) -> str:
    """Where a speedup's interval lies against the reference's 1: "above", "below" or "holds" (intervals are
    closed: one that reaches 1 holds it, and nothing is claimed)."""
    return "above" if lo > 1 else "below" if hi < 1 else "holds"


def verdict_words(score: dict, reference_present: bool) -> str:
    """Where an entry landed, in words: its speedup against the reference's 1 and whether the interval is
    clear of 1, judged on the digits shown (so the words never contradict the numbers)."""
    numbers = f"speedup {format_score(score)}"
    if not reference_present:
        return (f"{numbers} against the frozen reference compute-to-target; no comparison yet: run "
                f"`{IMPORT_RUNS}`, then `replaybench leaderboard`")
    if not score["reached"]:
        return f"{numbers}: slower than the reference (its median run never reaches the target)"
    side = side_of_one(*(round(x, 3) for x in score["ci95"]))
    return f"{numbers} against the reference: " + {
        "above": "faster than the reference (interval above 1)",
        "below": "slower than the reference (interval below 1)",
        "holds": "not resolved from it (the interval holds 1)"}[side]


def _verdict_cell(record: dict) -> str:
    c = record.get("comparison") or {}
    if "verdict" not in c:
        return "-"
    return f"{c['verdict']} ({c['adjusted_p_value']:.3f})"


def _final_cell(record: dict) -> str:
    f = record["final_accuracy"]
    return f"{f['mean']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]"


def ranking_words(results: dict) -> str:
    """How the board is ranked, in the words of its rules version."""
    if rules_version(results) == 3 and len(results["workloads"]) > 1:
        note = split_note(results)
        return ("on each workload, speedup = Hodges-Lehmann over the reference's and the entry's scored runs, with "
                "its distribution-free 95% interval, and the verdict the comparison with the reference, corrected "
                "across the board (Benjamini-Hochberg); the score is the geometric mean of an entry's speedups over "
                "the workloads, with a percentile-bootstrap 95% interval; ranked first by the workloads on which "
                "most of its seeds reach the target, then by the score, or by final accuracy / target for those "
                "that do not reach it; an entry's band is the first whose leader its rank interval reaches"
                + (f"; {note}" if note else ""))
    if rules_version(results) == 3:
        return ("speedup = Hodges-Lehmann over the reference's and the entry's scored runs, with its distribution-"
                "free 95% interval; the verdict is the comparison with the reference, corrected across the board "
                "(Benjamini-Hochberg); ranked by the speedup, and below every entry most of whose seeds reach the "
                "target those that do not, by final accuracy / target; an entry's band is the first whose leader "
                "its rank interval reaches")
    return ("speedup = reference compute-to-target / entry's (median over seeds); ranked by it, below it the "
            "entries whose median run never reaches the target, by best accuracy; a new band starts at the first "
            "entry separable at 95% from the current band's first (paired bootstrap over seeds)")


def table_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    workloads = sorted(results["workloads"])
    one = workloads[0] if len(workloads) == 1 else None
    header = ["band", "rank [95%]", "entry", "(W,T)", "seeds", "speedup (geo-mean) [95% CI]", "perf. profile"]
    v3 = rules_version(results) == 3  # the comparisons' verdicts, the final accuracy
    if one:
        header += ["compute-to-target (median [IQR])", "best acc (median curve [IQR])", "AUC", "pass@k at best",
                   "entropy"]
        if v3:
            header[6:6] = [VERDICT_V3]
            header.insert(len(header) - 3, FINAL_V3)
    else:
        header += [c for w in workloads for c in ([speedup_column(w)] + ([verdict_column(w)] if v3 else []))]
    header.append("flags")
    rows = []
    for e in results["entries"]:
        lo, hi = e["rank_interval"]
        s = e["score"]
        name = e["label"] + (" (reference)" if e["reference"] else "")
        row = [str(e["band"]), f"{e['rank']} [{lo}–{hi}]", name, split_text(e),
               "/".join(str(e["workloads"][w]["n_seeds"]) for w in workloads),
               format_score(s, "final" if v3 else "best"),
               format_number(e["performance_profile"])]
        if one:
            d = e["workloads"][one]
            c = d["compute_to_target"]
            pk = ", ".join(f"{k.rsplit('_', 1)[1]}: {v:.3f}" for k, v in d["pass_at_k_at_best"].items())
            row += [f"{format_compute(c['median'])} [{format_compute(c['q1'])}, {format_compute(c['q3'])}]",
                    f"{format_number(d['best_accuracy']['median'])} [{format_number(d['best_accuracy']['q1'])}, "
                    f"{format_number(d['best_accuracy']['q3'])}]",
                    format_number(d["auc"]["median"]), pk or "-", format_number(d["final_entropy"])]
            if v3:
                row[6:6] = [_verdict_cell(d)]
                row.insert(len(row) - 3, _final_cell(d))
        else:
            for w in workloads:
                row += [format_workload_speedup(e["workloads"][w], with_interval=v3)]
                row += [_verdict_cell(e["workloads"][w])] if v3 else []
        row.append("; ".join(e["flags"]))
        rows.append(row)
    if lacks_reference(results):
        keep = [i for i, col in enumerate(header) if not is_verdict_column(col)]
        header, rows = [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
    return header, rows


def store_notes(results: dict) -> list[str]:
    """What a board built from this store lacks, each with its fix (a fresh clone's store holds none of the runs
    that set the published targets)."""
    notes = [no_verdict_note(results)] if lacks_reference(results) else []
    for w, d in sorted(results["workloads"].items()):
        missing, total = len(d.get("target_runs_missing", [])), len(d["reference_run_ids"])
        if missing:
            notes.append(f"{w}: this store holds {total - missing} of the {total} reference runs that set the target "
                         f"({d['target_file']}, frozen from the published runs): entries are scored against that "
                         "target all the same; the published board with its runs is leaderboard/index.html")
    campaign = results.get("campaign")
    if not results["entries"] and campaign:
        holds = ("no entry has its scored runs on every workload yet" if results.get("not_ranked")
                 else "this store holds none of the campaign's scored runs")
        notes.append(f"no entry is ranked yet: {holds}; `replaybench campaign status {campaign['file']}` says which "
                     f"runs are left, `replaybench campaign run {campaign['file']}` makes them")
    elif not results["entries"]:
        notes.append(f"no entry is ranked yet: `{IMPORT_RUNS}` loads the published board's runs (seconds), "
                     "`replaybench baselines` runs the reference (4 seeds), `replaybench submit submissions/<entry>` "
                     "an entry")
    resumable = results.get("resumable_run_ids", [])
    if resumable:
        notes.append(f"{len(resumable)} of this store's own runs stopped before the end "
                     f"({', '.join(resumable)}): the command that started each, with --resume, finishes it from "
                     "its last checkpoint")
    return notes


def excluded_groups(results: dict) -> list[tuple[str, list[dict]]]:
    """The runs left out, grouped by why (compliance.exclusion_group), the largest group first."""
    groups: dict[str, list[dict]] = {}
    for x in results["excluded_runs"]:
        groups.setdefault(x.get("why", "excluded"), []).append(x)
    return sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))


def entry_counts(runs: list[dict]) -> str:
    """"fifo_uniform ×6, on_policy ×4": whose runs these are."""
    counts: dict[str, int] = {}
    for x in runs:
        name = x.get("name", x["strategy"])
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name} ×{n}" for name, n in sorted(counts.items(), key=lambda c: (-c[1], c[0])))


def print_leaderboard(results: dict, console=None, highlight: str | None = None) -> None:
    """The ranked table and what is not ranked; the entries `highlight` names in bold, marked "(yours)"."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    header, rows = table_rows(results)
    mine = highlighted_keys(results, highlight)
    for e, row in zip(results["entries"], rows):
        row[header.index("entry")] += YOURS if e["key"] in mine else ""
    flags = []
    if console.is_terminal and console.width < WIDE_TABLE:
        # a narrow terminal gets the columns that rank; the flags go below the table (results.json has the rest)
        keep = [header.index(c) for c in NARROW_COLUMNS if c in header]
        flags = [(row[header.index("entry")], row[-1]) for row in rows if row[-1]]
        header, rows = [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
    elif not console.is_terminal:
        console = Console(file=console.file, width=max(console.width, WIDE_TABLE))  # a file or pipe: one line a row
    caption = ("speedup = reference compute-to-target / entry's (median over seeds); "
               "the reference's runs are not in this store, so no entry is ranked" if lacks_reference(results)
               else ranking_words(results))
    table = Table(title=title(results), caption=caption)
    for col in header:
        table.add_column(col, justify="left" if col in ("entry", "flags") else "right")
    for e, row in zip(results["entries"], rows):
        table.add_row(*row, style="bold" if e["key"] in mine else None)
    console.print(table)
    for entry, flag in flags:
        console.print(f"{escape(entry)}: {escape(flag)}")
    for note in store_notes(results):  # under the table: what it cannot say, before the lists of left-out runs
        console.print(f"[yellow]note:[/] {escape(note)}")
    _print_left_out(results, console, highlight)
    for w, info in results["unscored_workloads"].items():
        then = f"run `{info['fix']}`" if info["fix"] else info["why"]
        console.print(f"[yellow]workload {w}: {info['runs']} runs not scored (no target); {then}[/]")


def _print_left_out(results: dict, console, highlight: str | None) -> None:
    """Below the ranking: the entries not ranked, the previews, the runs left out (one row per why: every run is
    in LEADERBOARD.md and on the page) and, for `highlight`, each of its own."""
    from rich.table import Table

    def table(name: str, columns: tuple[str, ...], rows: list[list]) -> None:
        if rows:
            t = Table(title=name)
            for col in columns:
                t.add_column(col)
            for row in rows:
                t.add_row(*map(str, row))
            console.print(t)

    table("not ranked", ("entry", "reason", "runs"),
          [[n["strategy"], n["reason"], len(n["run_ids"])] for n in results["not_ranked"]])
    table("previews (`submit --preview`: one seed, a short budget, never ranked)",
          ("workload", "entry", "seed", "budget", "best accuracy", "run id"),
          [[p["workload"], p["name"], p["seed"], format_compute(p["budget"]), f"{p['best_accuracy']:.3f}",
            p["run_id"]] for p in results.get("previews", [])])
    table("runs left out, by why", ("why", "runs", "entries"),
          [[why, len(runs), entry_counts(runs)] for why, runs in excluded_groups(results)])
    table(f"runs of {highlight} left out", ("workload", "seed", "run id", "reason"),
          [[x["workload"], x["seed"], x["run_id"], x["reason"]] for x in results["excluded_runs"]
           if highlight and highlight == x.get("name", x["strategy"])])


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(header, rows) -> list[str]:
    """A markdown table's lines: the header, its rule, a line per row (a cell's | escaped, its newlines spaces)."""
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + [
        "| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]


def rules_file(results: dict) -> str | None:
    """The scoring rules' file, relative to a published board's folder (beside its runs folder); None on a local
    board, which names the checkout's copy."""
    folder = results.get("runs_folder")
    return posixpath.join(posixpath.dirname(folder), "README.md") if folder else None


def replacement_words(results: dict, link) -> str:
    """The boards this published board replaced, or the board that replaced it, as sentences. link(text, path):
    a link to a path relative to the board's folder."""
    words = "".join(f" It replaces the board {r['board']} (scoring rules v{r['rules']}, built {r['generated'][:10]}), "
                    f"kept in {link(r['folder'] + '/', r['folder'] + '/')} with every run it names."
                    for r in results.get("replaced_boards", []))
    by = results.get("replaced_by")
    if by:
        words += (f" Replaced on {by['generated'][:10]} by the board {by['board']} "
                  f"({link('the board in force', '../../')}): its results.json is kept here as it was published, "
                  "this table and page rendered again from it.")
    return words


def render_markdown(results: dict) -> str:
    header, rows = table_rows(results)
    rules = rules_file(results)
    folder = results.get("runs_folder")
    store = f"the runs shipped in [{folder}/]({folder}/)" if folder else "MLflow"
    out = [f"# {title(results)}", "",
           f"Generated {results['generated']} from {store} (code {results['code_version']}) by "
           "`replaybench leaderboard build`; every number is in `results.json` with the MLflow run ids it comes "
           "from. Rules: " + (f"[README.md]({rules})" if rules else "`leaderboard/README.md`") + "."
           + replacement_words(results, lambda text, path: f"[{text}]({path})"), ""] + markdown_table(header, rows)
    out += _split_note_lines(results)
    notes = store_notes(results)
    if notes:
        out += [""] + [f"Note: {n}." for n in notes]
    out += ["", "## Not ranked", ""]
    if results["not_ranked"]:
        out += ["| entry | reason | runs |", "|---|---|---|"]
        out += [f"| {_md_cell(n['strategy'])} | {_md_cell(n['reason'])} | {len(n['run_ids'])} |"
                for n in results["not_ranked"]]
    else:
        out.append("None.")
    out += ["", "## Excluded runs", ""]
    groups = excluded_groups(results)
    if groups:
        out += ["| why | runs | entries |", "|---|---|---|"]
        out += [f"| {_md_cell(why)} | {len(runs)} | {_md_cell(entry_counts(runs))} |" for why, runs in groups]
    else:
        out.append("None.")
    for why, runs in groups:
        out += ["", f"### {why} ({len(runs)})", "", "| workload | entry | seed | MLflow run | reason |",
                "|---|---|---|---|---|"]
        out += [f"| {x['workload']} | {_md_cell(x.get('name', x['strategy']))} | {x['seed']} | `{x['run_id']}` | "
                f"{_md_cell(x['reason'])} |" for x in runs]
    if results.get("variants"):
        out += ["", "## Variants, for the findings", ""] + markdown_table(VARIANT_COLUMNS, variant_rows(results))
    if results.get("confirmation"):
        out += ["", "## Confirmation on fresh seeds", "",
                "Each confirmed entry's claim against the reference, tested again on the confirmation seeds alone by "
                "the rule fixed before those runs (docs/protocols/confirmation.md).", ""]
        out += markdown_table(CONFIRMATION_COLUMNS, confirmation_rows(results))
    if results.get("campaign_runs"):
        out += ["", "## Every run of the campaigns, by what it was for", ""]
        if campaign_words(results):
            out += [campaign_words(results) + ".", ""]
        out += ["| campaign / phase | runs |", "|---|---|"]
        out += [f"| {campaign_phase_label(results, phase)} | {len(ids)} |"
                for phase, ids in results["campaign_runs"].items()]
    if results["unscored_workloads"]:
        out += ["", "## Workloads without a target", ""]
        out += [f"- {w}: {i['runs']} runs; " + (f"`{i['fix']}`" if i["fix"] else i["why"])
                for w, i in results["unscored_workloads"].items()]
    return "\n".join(out) + "\n"


README_START = "<!-- results: written by `replaybench leaderboard build --publish` from leaderboard/results.json -->"
README_END = "<!-- end of results -->"
README_COLUMNS = ("band", "rank [95%]", "entry", "(W,T)", "speedup (geo-mean) [95% CI]",
                  "compute-to-target (median [IQR])", "best acc (median curve [IQR])", "seeds")


def readme_results(results: dict) -> str:
    """The README's results: the board's main columns, from the same rows as LEADERBOARD.md (never by hand)."""
    header, rows = table_rows(results)
    columns = [c for c in README_COLUMNS if c in header]
    if len(results["workloads"]) > 1:  # each workload's speedup after the score
        columns[5:5] = [speedup_column(w) for w in sorted(results["workloads"])]
    keep = [header.index(c) for c in columns]
    made = campaign_words(results)
    out = [f"**{title(results)}**, built {results['generated'][:10]} from the runs in `leaderboard/runs/`; "
           "[LEADERBOARD.md](leaderboard/LEADERBOARD.md) has every column, the entries not ranked and the runs "
           "excluded, `leaderboard/index.html` the plots." + (f" {made}." if made else "")
           + replacement_words(results, lambda text, path: f"[leaderboard/{text}](leaderboard/{path})"), ""]
    out += markdown_table([header[i] for i in keep], [[row[i] for i in keep] for row in rows])
    out += _split_note_lines(results)
    return "\n".join(out) + "\n"


def replace_between(text: str, start_marker: str, end_marker: str, block: str) -> str:
    """`text` with what lies between its two markers replaced by `block`; as it is when it lacks them (a copy of
    the file that keeps no generated part)."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        return text
    return text[:start + len(start_marker)] + "\n" + block + text[end:]


def with_readme_results(readme: str, results: dict) -> str:
    """`readme` with the text between its results markers replaced; as it is when it has no markers."""
    return replace_between(readme, README_START, README_END, readme_results(results))
