"""docs/findings.md's measured side, generated: each paper claim (hand-written in CLAIMS, no measured number in
it) beside what the published board (leaderboard/results.json) and the calibration sweeps
(leaderboard/calibration*.json) measured, worded by fixed rules from the statistics, never copied by hand.
`replaybench leaderboard build --publish` rewrites the text between the markers;
`python -m benchmark.leaderboard.findings` does it from the committed files."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from benchmark.leaderboard.comparisons import oriented, power
from benchmark.leaderboard.files import read_results
from benchmark.leaderboard.render import (
    CONFIRMATION_COLUMNS,
    confirmation_rows,
    format_compute,
    format_number,
    format_score,
    markdown_table,
    replace_between,
    rules_version,
    setting_of,
    side_of_one,
    split_text,
)
from benchmark.leaderboard.scoring_v3 import MEASURED_SD_LOG_CTT, POWER

FINDINGS_START = ("<!-- findings: written by `replaybench leaderboard build --publish` from leaderboard/results.json "
                  "and leaderboard/calibration*.json -->")
FINDINGS_END = "<!-- end of findings -->"
CALIBRATION_FILES = ("calibration.json", "calibration_buffer_size.json")
PART_BREAK = "<br>"  # a table cell holds no newline


# The verdict rules. Intervals are closed: two that touch overlap, and an interval that reaches 1 overlaps it, so
# nothing is claimed of them. Two entries' separate intervals are a coarser test than the board's paired bootstrap
# (its bands): disjoint ones differ, overlapping ones may differ all the same.

def against_one(ci) -> str:
    return {"above": "interval above 1", "below": "interval below 1", "holds": "interval overlaps 1"}[side_of_one(*ci)]


def between(first: str, first_ci, second: str, second_ci) -> str:
    if first_ci[0] > second_ci[1]:
        return f"disjoint ({first} above)"
    if second_ci[0] > first_ci[1]:
        return f"disjoint ({second} above)"
    return "overlapping: not resolved"


def direction(values) -> str:
    """How a calibration sweep's values move from one configuration to the next (never reached, inf, equals inf)."""
    steps = {(b > a) - (b < a) for a, b in zip(values, values[1:])}
    return {frozenset({1}): "rises at every step", frozenset({-1}): "falls at every step",
            frozenset({0}): "stays level"}.get(frozenset(steps), "never falls" if -1 not in steps
                                               else "never rises" if 1 not in steps else "goes both ways")


@dataclasses.dataclass
class Board:
    results: dict
    calibrations: dict  # file name -> its content, None when the folder lacks it
    to_leaderboard: str = "../leaderboard/"  # the leaderboard folder, relative to the findings' file
    on: str | None = None  # the workload the claims are read on (default: the board's first)

    @property
    def workload(self) -> str:  # the v2 board scores one workload; a campaign's, each in turn
        return self.on or sorted(self.results["workloads"])[0]

    def entry(self, pick: Pick) -> dict | None:
        found = [e for e in self.results["entries"] if pick.matches(e)]
        return found[0] if len(found) == 1 else None

    def reference(self) -> dict:
        return next(e for e in self.results["entries"] if e["reference"])

    @property
    def v3(self) -> bool:  # rules v3: claims tested and corrected together (results["claims"])
        return rules_version(self.results) == 3

    def claim(self, first: dict, second: dict) -> dict | None:
        return oriented(self.results.get("claims", []), first["label"], second["label"], self.workload)

    def reached(self, entry: dict) -> bool:
        """On the workload read (on a board of one, the score's: the same)."""
        if len(self.results["workloads"]) == 1:
            return entry["score"]["reached"]
        return entry["workloads"][self.workload]["reached"]

    def speedup(self, entry: dict) -> str:
        """The entry's speedup with its interval: the board's score, or on a board of several workloads the one on
        the workload read (its tested two-arm interval), the score being a mean over workloads."""
        accuracy = "final" if self.v3 else "best"  # what orders the entries that miss the target
        if len(self.results["workloads"]) == 1:
            s = entry["score"]
            return (f"{s['speedup_geomean']:.2f} [{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}]" if s["reached"]
                    else format_score(s, accuracy))
        d = entry["workloads"][self.workload]
        if not d["reached"]:
            return f"not reached: {accuracy} {d['relative_best']:.3f}× target"
        lo, hi = d["speedup"]["ci95"]
        return f"{d['speedup']['median']:.2f} [{lo:.2f}, {hi:.2f}]"


def worded(claim: dict) -> str:
    """A v3 claim as the wording rule has it, with its corrected p-value and probability of improvement."""
    return f"{claim['verdict']} (corrected p {claim['adjusted_p_value']:.3f}, PoI {claim['poi']:.2f})"


@dataclasses.dataclass(frozen=True)
class Pick:
    """A board entry by what the paper varies: its name (a baseline's is its strategy's; an entry of another loss,
    m2po or asymre, runs the fifo_uniform strategy under its own name), split (W,T) and buffer size N (None: it has
    none)."""

    name: str
    split: tuple[int, int] | None = (6, 2)  # None: whatever its tuning picked (a campaign's board holds it once)
    buffer_size: int | None = 360

    def matches(self, entry: dict) -> bool:
        if self.split is None:
            return entry["name"] == self.name
        return (entry["name"], (entry["workers"], entry["trainers"]), entry["params"].get("buffer_size")) == (
            self.name, self.split, self.buffer_size)

    def parts(self) -> dict[str, str]:
        if self.split is None:
            return {"name": f"`{self.name}`", "split": "", "N": ""}
        return {"name": f"`{self.name}`", "split": f"({self.split[0]},{self.split[1]})",
                "N": "" if self.buffer_size is None else f"N={self.buffer_size}"}

    def missing(self) -> str:
        return f"no single entry is {' '.join(p for p in self.parts().values() if p)} on this board"


def ran_at(entry: dict, workload: str) -> str:
    """" at (W,T) N=n": where the entry ran on the workload, when its label does not say (a campaign's board names
    an entry alone, at whatever its tuning picked there)."""
    split, size = split_text(entry, workload), setting_of(entry, workload)["params"].get("buffer_size")
    return "" if split in entry["label"] else f" at {split}" + ("" if size is None else f" N={size}")


def best_accuracy(entry: dict, workload: str) -> str:
    best = entry["workloads"][workload]["best_accuracy"]
    return f"{best['median']:.3f} [{best['q1']:.3f}, {best['q3']:.3f}]"


def pass_at_best(record: dict) -> str:
    """The largest k's pass@k at the best point, e.g. "pass@4 0.958"."""
    key = max(record, key=lambda k: int(k.rsplit("_", 1)[1]))
    return f"pass@{key.rsplit('_', 1)[1]} {record[key]:.3f}"


def compute_or_never(x: float) -> str:
    return "never" if math.isinf(x) else format_compute(x)


@dataclasses.dataclass(frozen=True)
class Card:
    """One entry on the board: its speedup against the reference's 1, band, rank, best accuracy, compute to the
    target, and how much and how stale it replays."""

    pick: Pick

    def render(self, board: Board) -> str:
        e = board.entry(self.pick)
        if e is None:
            return self.pick.missing()
        w, entries, s = board.workload, board.results["entries"], e["score"]
        d = e["workloads"][w]
        against = board.claim(e, board.reference()) if board.v3 and not e["reference"] else None
        out = [f"`{e['label']}`{ran_at(e, w) if self.pick.split is None else ''}"
               + (" (the reference)" if e["reference"] else "")
               + f": speedup {board.speedup(e)}"
               + (f", {worded(against)} against the reference" if against else
                  f", {against_one(s['ci95'])}" if board.reached(e) and not board.v3 else "")]
        band = f"band {e['band']} of {max(x['band'] for x in entries)}"
        lo, hi = e["rank_interval"]
        out.append(band + ("" if e["reference"] else f" (the reference's: {board.reference()['band']})")
                   + f", rank [{lo}–{hi}] of {len(entries)}")
        highest = max(x["workloads"][w]["best_accuracy"]["median"] for x in entries)
        out.append(f"best accuracy {best_accuracy(e, w)}"
                   + (", the board's highest" if d["best_accuracy"]["median"] == highest else ""))
        c = d["compute_to_target"]
        if board.reached(e):
            out.append(f"compute to target {format_compute(c['median'])} "
                       f"[{format_compute(c['q1'])}, {format_compute(c['q3'])}]")
        else:  # a best that is the first evaluation is an entry that never learns
            out.append(f"its median curve's first evaluation {d['accuracy_curve']['median'][0]:.3f}")
        if d["replay_ratio"] and d["offpolicy_mean"]:
            out.append(f"replay ratio {d['replay_ratio']['median']:.2f}, "
                       f"samples {d['offpolicy_mean']['median']:.1f} trainer steps old on average")
        return ", ".join(out)


@dataclasses.dataclass(frozen=True)
class Compare:
    """Pairs of entries that differ in one same respect (entry name, split or N): their speedup intervals side by
    side, each pair's verdict, and the verdicts tallied."""

    pairs: tuple[tuple[Pick, Pick], ...]

    def render(self, board: Board) -> str:
        a, b = (p.parts() for p in self.pairs[0])
        differs = [k for k in a if a[k] != b[k]]
        first, second = (" ".join(p[k] for k in differs) for p in (a, b))
        rows, verdicts = [], []
        for x, y in self.pairs:
            ex, ey = board.entry(x), board.entry(y)
            if ex is None or ey is None:
                rows.append((x if ex is None else y).missing())
                continue
            same = " ".join(v for k, v in x.parts().items() if k not in differs and v)
            same += ": " if same else ""  # a campaign's pair: one entry each, nothing else in common
            claim = board.claim(ex, ey) if board.v3 else None
            if claim:
                verdicts.append(claim["verdict"])
                rows.append(f"{same}{claim['speedup']:.2f} [{claim['ci95'][0]:.2f}, {claim['ci95'][1]:.2f}] times "
                            f"as fast, {worded(claim)}")
                continue
            verdict = between(first, ex["score"]["ci95"], second, ey["score"]["ci95"])
            verdicts.append(verdict)
            rows.append(f"{same}{board.speedup(ex)} against {board.speedup(ey)}, {verdict}")
        kinds = ("resolved faster", "resolved slower", "not resolved") if board.v3 else (
            f"disjoint ({first} above)", f"disjoint ({second} above)", "overlapping: not resolved")
        tally = ", ".join(f"{v} at {verdicts.count(v)} of {len(verdicts)}" for v in kinds if v in verdicts)
        return (f"{first} against {second}, speedups: {tally}. " if verdicts else "") + "; ".join(rows)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A calibration sweep (one file): its configurations in the order of what it varies, each beside the
    reference of the same seeds."""

    file: str
    along: str  # "replay_ratio" or "buffer_size"

    def render(self, board: Board) -> str:
        cal = board.calibrations.get(self.file)
        if cal is None:
            return f"`leaderboard/{self.file}` is not beside this board"
        configs = {c["config"]: c for c in cal["configs"]}
        ref = configs.pop(cal["reference"])
        swept = sorted(configs.values(), key=lambda c: c[self.along])
        strategies = ", ".join(f"`{s}`" for s in sorted({c["strategy"] for c in swept}))
        fractions = "/".join(f"{f:g}" for f in cal["levels"])

        def reached(c):
            return "/".join(compute_or_never(level["compute"]) for level in c["levels"])

        rows = [f"({c['workers']},{c['trainers']}) N={c['buffer_size']}: replay ratio {c['replay_ratio']:.2f}, "
                f"{c['buffer_size'] * c['replay_ratio'] / cal['batch_size']:.1f} steps in the buffer, best accuracy "
                f"{c['best_accuracy']['median']:.3f}, {pass_at_best(c['best_accuracy']['pass_at_k'])} at the best, "
                f"to {fractions}: {reached(c)}" for c in swept]
        return (f"the calibration sweep of {strategies} (`leaderboard/{self.file}`, seeds "
                f"{', '.join(map(str, cal['seeds']))}: two seeds, a direction, not an interval; compute to "
                f"{fractions} of the reference's best accuracy {ref['reference_best']:.3f}, the faster seed's; "
                f"steps in the buffer = N × replay ratio / B, B = {cal['batch_size']}; "
                f"`{ref['config']}` reaches them at {reached(ref)}). " + "; ".join(rows)
                + f". Along it best accuracy {direction([c['best_accuracy']['median'] for c in swept])}, the "
                f"compute to {cal['levels'][0]:g} of the reference's best "
                f"{direction([c['levels'][0]['compute'] for c in swept])}")


@dataclasses.dataclass(frozen=True)
class AboveOne:
    """Every entry whose speedup interval is above 1, as the rule finds them on the board."""

    def render(self, board: Board) -> str:
        if board.v3:
            faster = [f"`{e['label']}` {board.speedup(e)}" for e in board.results["entries"] if not e["reference"]
                      and (board.claim(e, board.reference()) or {}).get("verdict") == "resolved faster"]
            return "resolved faster than the reference (corrected) on this board: " + (", ".join(faster) or "none")
        found = [f"`{e['label']}` {board.speedup(e)}" for e in board.results["entries"]
                 if e["score"]["reached"] and against_one(e["score"]["ci95"]) == "interval above 1"]
        return "speedup interval above 1 on this board: " + (", ".join(found) or "none")


@dataclasses.dataclass(frozen=True)
class NeverUsed:
    """The share of an entry's rollouts it never trains on, over all its seeds. results.json holds the share of
    first uses among the trained samples and the replay ratio (trained / generated): their product is the share
    of the generated rollouts used at least once."""

    picks: tuple[Pick, ...]

    def share(self, board: Board, pick: Pick) -> str:
        e = board.entry(pick)
        if e is None:
            return pick.missing()
        d = e["workloads"][board.workload]
        firsts = (d["since_last_use_distribution"] or {}).get("new")  # boards before the distributions lack it
        if firsts is None or not d["replay_ratio"]:
            return f"`{e['label']}` not recorded"
        return f"`{e['label']}` {100 * (1 - firsts * d['replay_ratio']['median']):.1f}%"

    def render(self, board: Board) -> str:
        out = [self.share(board, pick) for pick in self.picks]
        return ("rollouts never trained on (1 − the first uses' share of the trained samples × the replay ratio): "
                + ", ".join(out))


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """Best accuracy with its spread over seeds, and pass@k at that point."""

    picks: tuple[Pick, ...]

    def render(self, board: Board) -> str:
        out = []
        for pick in self.picks:
            e = board.entry(pick)
            out.append(pick.missing() if e is None else f"`{e['label']}` {best_accuracy(e, board.workload)}, "
                       + pass_at_best(e["workloads"][board.workload]["pass_at_k_at_best"]))
        return "best accuracy [IQR] and pass@k there: " + "; ".join(out)


@dataclasses.dataclass(frozen=True)
class Params:
    """An entry's parameters as it ran, and links to its runs' summaries for what the board does not hold."""

    pick: Pick
    in_summaries: str  # what a reader finds in each run's summary.json

    def render(self, board: Board) -> str:
        e = board.entry(self.pick)
        if e is None:
            return self.pick.missing()
        setting = setting_of(e, board.workload)
        chosen = {**setting["params"], **setting["open_track"]}
        per_run = e["workloads"][board.workload]["per_run"]
        folder = board.results.get("runs_folder", "runs")
        links = ", ".join(f"[seed {r['seed']}]({board.to_leaderboard}{folder}/{run_id}/summary.json)"
                          for run_id, r in sorted(per_run.items(), key=lambda kv: kv[1]["seed"]))
        return (f"`{e['label']}` ran with " + ", ".join(f"{k} {v}" for k, v in chosen.items())
                + f" (their meaning: [baselines/README.md](../baselines/README.md)); {self.in_summaries} each run's "
                f"summary.json ({links})")


@dataclasses.dataclass(frozen=True)
class Claim:
    paper: str  # the claim as the paper makes it: hand-written, no number measured here
    measured: tuple  # the parts of the CPU tier's side, each rendering itself from the files


BUFFERS = ("fifo_uniform", "positive_bias", "prioritized", "without_replacement", "prefer_unused", "sharded")
SETTINGS = (((6, 2), 360), ((6, 2), 90), ((5, 3), 90))  # the rule's pick, the paper's N there, the paper's split
REFERENCE = Pick("on_policy", (6, 2), 90)
RLEP = Pick("rlep", (6, 2), None)


def against_fifo(strategy: str) -> Compare:
    return Compare(tuple((Pick(strategy, s, n), Pick("fifo_uniform", s, n)) for s, n in SETTINGS))


CLAIMS = (
    Claim("A FIFO buffer at (5,3), N/B ≈ 1.4, saves compute against on-policy at (6,2), μ = 5.28",
          (Card(Pick("fifo_uniform", (5, 3), 90)), Card(Pick("fifo_uniform")), Card(Pick("fifo_uniform", (6, 2), 90)),
           Card(REFERENCE), AboveOne())),
    Claim("Positive bias (keeping correct rollouts) helps",
          (against_fifo("positive_bias"), Card(Pick("positive_bias")))),
    Claim("Sampling without replacement: no clear effect", (against_fifo("without_replacement"),)),
    Claim("Prefer never-used rollouts: no clear effect",
          (against_fifo("prefer_unused"), NeverUsed((Pick("fifo_uniform"), Pick("prefer_unused"))))),
    Claim("Too high a replay ratio degrades ((4,4): 17.6 in one setting)",
          (Sweep("calibration.json", "replay_ratio"), Compare(tuple((Pick(b, (6, 2), 90), Pick(b, (5, 3), 90))
                                                                     for b in BUFFERS)))),
    Claim("A larger N is slower but more stable and better at pass@k",
          (Sweep("calibration_buffer_size.json", "buffer_size"),
           Compare(tuple((Pick(b), Pick(b, (6, 2), 90)) for b in BUFFERS)),
           Accuracy((Pick("fifo_uniform"), Pick("fifo_uniform", (6, 2), 90))))),
    Claim("One shard of N/T per trainer (the paper's sharded buffer)", (against_fifo("sharded"),)),
    Claim("(beyond the papers) prioritized replay by \\|advantage\\|",
          (against_fifo("prioritized"), Card(Pick("prioritized")))),
    Claim("RLEP (Kwai Klear 2025): replaying successes of an RL-trained policy speeds up learning",
          (Card(RLEP), Params(RLEP, "the compute its pool took (phase 1 and the pool's generation, charged in its "
                                    "speedup) is `pool.compute` in"))),
    Claim("(a control, not in the paper) training forever on the first N rollouts",
          (Card(Pick("oldest_first", (5, 3), 90)),)),
)


@dataclasses.dataclass(frozen=True)
class Variants:
    """A campaign's variants of some entries (other splits or buffer sizes, never ranked), each against the
    reference's scored runs, in the order of their replay ratio."""

    strategies: tuple[str, ...]

    def render(self, board: Board) -> str:
        rows = sorted((v for v in board.results.get("variants", []) if v["workload"] == board.workload
                       and v["strategy"] in self.strategies), key=lambda v: v["replay_ratio"] or 0)
        if not rows:
            return "no variant of " + ", ".join(f"`{s}`" for s in self.strategies) + " on this workload"
        return "variants against the reference (never ranked; corrected together): " + "; ".join(
            f"`{v['variant']}`: replay ratio {format_number(v['replay_ratio'], '{:.2f}')}, speedup "
            f"{v['speedup']:.2f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}], {worded(v)}, best accuracy "
            f"{v['best_accuracy']['median']:.3f}" for v in rows)


def _any(name: str) -> Pick:
    return Pick(name, None, None)


def _against_fifo_any(name: str) -> Compare:
    return Compare(((_any(name), _any("fifo_uniform")),))


FIELD_METHODS = ("fresh_anchored", "staleness_bounded", "m2po", "prompt_replay", "asymre")
CAMPAIGN_CLAIMS = (
    Claim("A FIFO buffer saves compute against on-policy (the paper: (5,3), N/B ≈ 1.4, against (6,2), μ = 5.28)",
          (Card(_any("fifo_uniform")), Card(_any("on_policy")), Variants(("fifo_uniform",)), AboveOne())),
    Claim("Positive bias (keeping correct rollouts) helps",
          (_against_fifo_any("positive_bias"), Card(_any("positive_bias")), Variants(("positive_bias",)))),
    Claim("Sampling without replacement: no clear effect", (_against_fifo_any("without_replacement"),)),
    Claim("Prefer never-used rollouts: no clear effect",
          (_against_fifo_any("prefer_unused"), NeverUsed((_any("fifo_uniform"), _any("prefer_unused"))))),
    Claim("Too high a replay ratio degrades ((4,4): 17.6 in one setting)", (Variants(("fifo_uniform",)),)),
    Claim("One shard of N/T per trainer (the paper's sharded buffer)", (_against_fifo_any("sharded"),)),
    Claim("(beyond the papers) prioritized replay by \\|advantage\\|",
          (_against_fifo_any("prioritized"), Card(_any("prioritized")))),
    Claim("RLEP (Kwai Klear 2025): replaying successes of an RL-trained policy speeds up learning",
          (Card(_any("rlep")),)),
    Claim("(a control, not in the paper) training forever on the first N rollouts", (Card(_any("oldest_first")),)),
    Claim("(the field, 2025–26: docs/methods.md) staleness-aware losses and buffers, and AsymRE",
          tuple(Card(_any(m)) for m in FIELD_METHODS)),
)


VERDICTS = ("resolved faster", "not resolved", "resolved slower")


def replay_tally(board: Board) -> str:
    """The papers' claim in one line for the workload: how the ranked entries that replay (a median replay ratio
    above 1) came out against the reference."""
    named: dict[str, list[str]] = {v: [] for v in VERDICTS}
    reference = board.reference()
    for e in board.results["entries"]:
        ratio = (e["workloads"].get(board.workload) or {}).get("replay_ratio")
        claim = None if e["reference"] else board.claim(e, reference)
        if claim and ratio and ratio["median"] > 1:
            named[claim["verdict"]].append(f"`{e['label']}`")
    n = sum(map(len, named.values()))
    return (f"On {board.workload}, of the {n} ranked entries that replay (a median replay ratio above 1), against "
            "the reference: " + "; ".join(f"{v} {len(names)}" + (f" ({', '.join(names)})" if names else "")
                                          for v, names in named.items()) + ".")


def campaign_findings_block(results: dict, to_leaderboard: str = "../leaderboard/") -> str:
    """A campaign board's findings: how to read them, then per workload one row per claim, then which verdicts
    replicated on the confirmation seeds."""
    c = results["campaign"]
    out = [_v3_reading(Board(results, {}, to_leaderboard), calibrations=False) + (
        f" Made by the campaign {c['name']} (`{c['file']}`): every entry at the pick of the same tuning budget, "
        "the variants at the scored seeds, the confirmation on seeds no run had used.")]
    out += [""] + ["- " + replay_tally(Board(results, {}, to_leaderboard, on=w)) for w in sorted(results["workloads"])]
    for w in sorted(results["workloads"]):
        board = Board(results, {}, to_leaderboard, on=w)
        out += ["", f"| the paper | the CPU tier ({w} v{results['workloads'][w]['version']}) |", "|---|---|"]
        out += [f"| {claim.paper} | " + PART_BREAK.join(part.render(board).replace("|", "\\|")
                                                         for part in claim.measured) + " |"
                for claim in CAMPAIGN_CLAIMS]
    return "\n".join(out + [""] + confirmation_findings(results, to_leaderboard)) + "\n"


def confirmation_findings(results: dict, to_leaderboard: str) -> list[str]:
    """Which verdicts replicated on the confirmation seeds, with what docs/protocols/confirmation.md asks beside
    each: both speedups, both PoIs, every run, and for a claim that did not replicate the power its confirmation had
    to replicate it, were the scored estimate the true speedup."""
    rows = results.get("confirmation", [])
    if not rows:
        return ["Confirmation on fresh seeds (docs/protocols/confirmation.md): not run yet."]
    folder = results.get("runs_folder", "runs")

    def runs(ids):
        return " ".join(f"[{i[:8]}]({to_leaderboard}{folder}/{i}/)" for i in ids)
    seeds = {r["workload"]: r["confirmation"]["seeds"] for r in rows}
    out = ["Confirmation on fresh seeds (docs/protocols/confirmation.md): the reference and each confirmed entry run "
           "again on seeds no run had used (" + "; ".join(f"{w}: {', '.join(map(str, s))}" for w, s in seeds.items())
           + "); each entry's claim against the reference tested again on those runs alone, the p-values of the "
           "claims resolved on the scored seeds Holm-corrected together.", ""]
    out += markdown_table(CONFIRMATION_COLUMNS + ("the entry's confirmation runs",),
                          [[*cells, runs(r["run_ids"])] for cells, r in zip(confirmation_rows(results), rows)])
    references = {r["workload"]: r["reference_run_ids"] for r in rows}
    out += ["", "The reference's confirmation runs: " + "; ".join(f"{w}: {runs(ids)}" for w, ids in
                                                                  references.items()) + "."]
    for r in rows:
        if r["verdict"] != "not replicated":
            continue
        scored = r["scored"]["speedup"]
        chance = power(MEASURED_SD_LOG_CTT, len(r["confirmation"]["seeds"]), max(scored, 1 / scored))
        out += ["", f"`{r['entry']}` on {r['workload']} did not replicate; with {len(r['confirmation']['seeds'])} "
                f"seeds an arm and the spread the power analysis measured (sd of log compute to target "
                f"{MEASURED_SD_LOG_CTT}), a true speedup of {scored:.2f}, its scored estimate, would have put the "
                f"interval on their side of 1 with probability {chance:.2f}, before the Holm correction "
                "(`comparisons.power`), so this is "
                + ("weak evidence against the claim." if chance < POWER else "evidence against the claim.")]
    return out


def findings_block(results: dict, calibrations: dict, to_leaderboard: str = "../leaderboard/") -> str:
    """The generated part of docs/findings.md: how to read it (in the words of the board's rules version), then
    one row per claim. to_leaderboard: the leaderboard folder relative to the file it goes into."""
    if results.get("campaign"):
        return campaign_findings_block(results, to_leaderboard)
    board = Board(results, calibrations, to_leaderboard)
    w = results["workloads"][board.workload]
    out = [_v3_reading(board) if board.v3 else _v2_reading(board, calibrations), "",
           f"| the paper | the CPU tier ({board.workload} v{w['version']}) |", "|---|---|"]
    out += [f"| {c.paper} | " + PART_BREAK.join(part.render(board).replace("|", "\\|") for part in c.measured)
            + " |" for c in CLAIMS]
    return "\n".join(out) + "\n"


def _v2_reading(board: Board, calibrations: dict) -> str:
    results, w = board.results, board.results["workloads"][board.workload]
    seeds = sorted({s for c in calibrations.values() if c for s in c["seeds"]})
    return (f"The board of {results['generated'][:10]} ([LEADERBOARD.md](../leaderboard/LEADERBOARD.md); the run ids "
            "behind each number in `leaderboard/results.json`), scored seeds "
            f"{', '.join(map(str, w['scored_seeds']))}. A speedup is the reference's compute to the target over "
            "the entry's (medians over seeds), with its 95% paired-bootstrap interval [low, high]; a best accuracy is "
            "the maximum of the median curve over seeds and a compute to target the median over seeds, each with the "
            "quartiles over seeds [IQR], not an interval. Verdicts "
            "follow fixed rules: a speedup interval is above 1, below 1 or overlaps 1; two entries' intervals are "
            "disjoint (the one above named) or overlapping: not resolved (intervals that touch overlap; separate "
            "intervals are coarser than the board's paired bands, so overlapping ones may still differ). The "
            "calibration rows come from the sweeps on seeds " + ", ".join(map(str, seeds))
            + " (`leaderboard/calibration.json`, `leaderboard/calibration_buffer_size.json`): two seeds, a "
            "direction, not an interval.")


def _v3_reading(board: Board, calibrations: bool = True) -> str:
    w = board.results["workloads"][board.workload]
    return (f"The board of {board.results['generated'][:10]} under scoring rules v3 (LEADERBOARD.md beside it; the run "
            f"ids behind each number in its `results.json`, and every claim below in its `claims`), scored seeds "
            f"{', '.join(map(str, w['scored_seeds']))}. A speedup is the Hodges-Lehmann estimate over the two arms' "
            "scored runs with its distribution-free 95% interval [low, high]. Every comparison here and on the board "
            "(each entry with the reference, each pair below) is tested by Mann-Whitney and corrected together "
            "(Benjamini-Hochberg); the wording rule: \"resolved faster\" or \"resolved slower\" at a corrected "
            "p below 0.05, else \"not resolved\"; PoI is the probability that a run of the first reaches the "
            "target with less compute than a run of the second."
            + (" The calibration rows are two seeds, a direction, not an interval." if calibrations else ""))


def read_calibrations(board_dir: Path) -> dict:
    return {name: read_results(board_dir / name) if (board_dir / name).is_file() else None
            for name in CALIBRATION_FILES}


def with_findings(doc: str, results: dict, calibrations: dict) -> str:
    """`doc` with the text between its findings markers generated anew; as it is when it has no markers."""
    return replace_between(doc, FINDINGS_START, FINDINGS_END, findings_block(results, calibrations))


if __name__ == "__main__":  # regenerate docs/findings.md from the committed board, no MLflow needed
    from benchmark.leaderboard.files import write_atomic
    from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT

    doc = REPO_ROOT / "docs" / "findings.md"
    write_atomic(doc, with_findings(doc.read_text(), read_results(LEADERBOARD_DIR / "results.json"),
                                    read_calibrations(LEADERBOARD_DIR)))
