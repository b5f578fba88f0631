"""docs/findings.md's verdict rules on hand-made statistics: a speedup interval against 1, two entries' intervals
against each other (touching counts as overlapping), a sweep's direction, and the parts built from them."""

import math

from benchmark.leaderboard.findings import (
    AboveOne,
    Board,
    Card,
    Compare,
    Pick,
    Sweep,
    against_one,
    between,
    direction,
)


def test_an_interval_is_above_below_or_overlapping_1():
    assert against_one([1.05, 1.47]) == "interval above 1"
    assert against_one([0.65, 0.73]) == "interval below 1"
    assert against_one([0.81, 1.00]) == "interval overlaps 1"  # reaching 1 is not above or below it
    assert against_one([1.00, 1.10]) == "interval overlaps 1"
    assert against_one([0.90, 1.20]) == "interval overlaps 1"


def test_two_intervals_are_disjoint_with_the_one_above_named_or_not_resolved():
    assert between("A", [1.16, 1.47], "B", [0.81, 1.00]) == "disjoint (A above)"
    assert between("A", [0.65, 0.73], "B", [0.85, 1.00]) == "disjoint (B above)"
    assert between("A", [0.88, 1.16], "B", [0.81, 1.00]) == "overlapping: not resolved"
    assert between("A", [1.00, 1.10], "B", [0.88, 1.00]) == "overlapping: not resolved"  # they touch


def test_a_sweeps_direction():
    assert direction([0.82, 0.78, 0.67]) == "falls at every step"
    assert direction([2.64e6, 3.24e6, math.inf, math.inf]) == "never falls"  # never reached equals never reached
    assert direction([0.8, 0.8]) == "stays level"
    assert direction([0.8, 0.9, 0.7]) == "goes both ways"


def entry(strategy, ci, split=(6, 2), n=360, band=2, reference=False, name=None):
    reached = ci is not None
    return {"strategy": strategy, "name": name or strategy, "workers": split[0], "trainers": split[1],
            "params": {"buffer_size": n}, "label": f"{name or strategy} ({split[0]},{split[1]}) N={n}",
            "reference": reference, "band": band,
            "rank_interval": [1, 2], "open_track": {},
            "score": {"reached": reached, "speedup_geomean": sum(ci) / 2 if reached else None,
                      "ci95": ci or [0.0, 0.0], "best_vs_target": 0.5, "best_vs_target_ci95": [0.4, 0.6]},
            "workloads": {"w": {"best_accuracy": {"median": 0.8, "q1": 0.7, "q3": 0.9},
                                "compute_to_target": {"median": 1e6, "q1": 9e5, "q3": 1.2e6},
                                "accuracy_curve": {"median": [0.2, 0.5]}, "replay_ratio": None,
                                "offpolicy_mean": None}}}


BOARD = Board({"workloads": {"w": {}}, "entries": [
    entry("on_policy", [0.9, 1.0], n=90, reference=True), entry("positive_bias", [1.2, 1.4], band=1),
    entry("fifo_uniform", [0.8, 1.0]), entry("positive_bias", [1.0, 1.1], n=90),
    entry("fifo_uniform", [0.9, 1.0], n=90), entry("oldest_first", None, band=3)]}, {"calibration.json": None})


def test_the_parts_word_the_board_by_the_rules():
    compare = Compare(((Pick("positive_bias"), Pick("fifo_uniform")),
                       (Pick("positive_bias", (6, 2), 90), Pick("fifo_uniform", (6, 2), 90)),
                       (Pick("positive_bias", (5, 3), 90), Pick("fifo_uniform", (5, 3), 90))))
    assert compare.render(BOARD) == (
        "`positive_bias` against `fifo_uniform`, speedups: disjoint (`positive_bias` above) at 1 of 2, "
        "overlapping: not resolved at 1 of 2. (6,2) N=360: 1.30 [1.20, 1.40] against 0.90 [0.80, 1.00], disjoint "
        "(`positive_bias` above); (6,2) N=90: 1.05 [1.00, 1.10] against 0.95 [0.90, 1.00], overlapping: not "
        "resolved; no single entry is `positive_bias` (5,3) N=90 on this board")
    card = Card(Pick("positive_bias")).render(BOARD)
    assert card.startswith("`positive_bias (6,2) N=360`: speedup 1.30 [1.20, 1.40], interval above 1, band 1 of 3 "
                           "(the reference's: 2)")
    assert "the board's highest" in card and "compute to target 1.00M [900k, 1.20M]" in card
    assert "speedup not reached" in Card(Pick("oldest_first")).render(BOARD)
    assert AboveOne().render(BOARD) == ("speedup interval above 1 on this board: `positive_bias (6,2) N=360` "
                                        "1.30 [1.20, 1.40]")
    assert Sweep("calibration.json", "replay_ratio").render(BOARD) == ("`leaderboard/calibration.json` is not "
                                                                       "beside this board")


def test_a_campaign_boards_claims_find_each_entry_by_its_name_not_its_strategy():
    """m2po and asymre run the fifo_uniform strategy under their own losses: the claims about FIFO still find the
    one fifo_uniform entry, and each loss its own."""
    from benchmark.leaderboard.findings import CAMPAIGN_CLAIMS, _any

    board = Board({"workloads": {"w": {}}, "entries": [
        entry("on_policy", [0.9, 1.0], n=90, reference=True), entry("fifo_uniform", [0.8, 1.0]),
        entry("fifo_uniform", [1.1, 1.3], name="m2po"), entry("fifo_uniform", [0.7, 0.9], name="asymre"),
        entry("prefer_unused", [1.0, 1.2])]}, {})
    assert Card(_any("fifo_uniform")).render(board).startswith("`fifo_uniform (6,2) N=360`: speedup 0.90")
    assert Card(_any("m2po")).render(board).startswith("`m2po (6,2) N=360`: speedup 1.20")
    assert Compare(((_any("prefer_unused"), _any("fifo_uniform")),)).render(board).startswith(
        "`prefer_unused` against `fifo_uniform`, speedups: overlapping: not resolved at 1 of 1. 1.10 [1.00, 1.20] "
        "against 0.90 [0.80, 1.00], overlapping")
    every = " ".join(part.render(board) for claim in CAMPAIGN_CLAIMS for part in claim.measured
                     if isinstance(part, (Card, Compare)))
    assert "no single entry is `fifo_uniform`" not in every and "no single entry is `m2po`" not in every


def test_the_replay_tally_counts_the_entries_that_replay_by_their_verdict_against_the_reference():
    from benchmark.leaderboard.findings import replay_tally

    def replaying(name, ratio, reference=False):
        e = entry(name, [1.0, 1.2], n=90 if reference else 360, reference=reference)
        e["workloads"]["w"].update(replay_ratio={"median": ratio})
        return e

    def claim(first, second, verdict):  # as the board holds it, either way round
        return {"workload": "w", "first": first, "second": second, "verdict": verdict, "speedup": 1.0,
                "ci95": [1.0, 1.0], "poi": 0.5, "first_run_ids": [], "second_run_ids": []}

    board = Board({"workloads": {"w": {}}, "entries": [
        replaying("positive_bias", 1.76), replaying("on_policy", 1.0, reference=True), replaying("fifo_uniform", 3.17),
        replaying("rlep", 0.7), replaying("oldest_first", 3.2)], "claims": [
        claim("positive_bias (6,2) N=360", "on_policy (6,2) N=90", "resolved faster"),
        claim("on_policy (6,2) N=90", "fifo_uniform (6,2) N=360", "not resolved"),
        claim("rlep (6,2) N=360", "on_policy (6,2) N=90", "resolved slower"),
        claim("on_policy (6,2) N=90", "oldest_first (6,2) N=360", "resolved faster")]}, {})
    assert replay_tally(board) == (
        "On w, of the 3 ranked entries that replay (a median replay ratio above 1), against the reference: "
        "resolved faster 1 (`positive_bias (6,2) N=360`); not resolved 1 (`fifo_uniform (6,2) N=360`); "
        "resolved slower 1 (`oldest_first (6,2) N=360`).")  # rlep trains on fewer samples than it generates


def test_the_confirmation_reports_what_its_protocol_asks_beside_each_verdict():
    """docs/protocols/confirmation.md: both speedups with their intervals, both PoIs, every run, whether the
    estimate falls inside the scored interval, and beside a claim that did not replicate, the power it had."""
    from benchmark.leaderboard.findings import confirmation_findings

    def row(entry, scored, confirmed, p, verdict, ids):
        return {"workload": "w", "entry": entry, "reference": "ref", "verdict": verdict, "run_ids": ids,
                "reference_run_ids": ["r" * 32],
                "scored": {"speedup": scored, "ci95": [scored - 0.04, scored + 0.05], "poi": 0.79,
                           "adjusted_p_value": 0.01, "verdict": "resolved faster"},
                "confirmation": {"speedup": confirmed, "ci95": [1.0, 1.15], "poi": 0.71, "p_value": p,
                                 "adjusted_p_value": p, "seeds": list(range(30, 40)),
                                 "inside_scored_interval": True}}
    lines = confirmation_findings({"confirmation": [
        row("fast", 1.13, 1.14, 0.005, "replicated", ["a" * 32]),
        row("near", 1.09, 1.08, 0.057, "not replicated", ["b" * 32, "c" * 32])]}, "../leaderboard/")
    text = "\n".join(lines)
    assert "| w | near | 1.09 [1.05, 1.14], PoI 0.79 | resolved faster | 1.08 [1.00, 1.15], PoI 0.71 | 0.057 | yes " \
           "| not replicated |" in text
    assert all(f"](../leaderboard/runs/{c * 32}/)" in text for c in "abcr")
    [power_line] = [line for line in lines if line.startswith("`near` on w did not replicate")]
    assert "a true speedup of 1.09" in power_line and "weak evidence against the claim" in power_line
    assert not any(line.startswith("`fast` on w did not") for line in lines)
    assert confirmation_findings({}, "") == [
        "Confirmation on fresh seeds (docs/protocols/confirmation.md): not run yet."]


def test_publishing_the_board_writes_the_findings_from_its_results(tmp_path, monkeypatch):
    """`build --publish` rewrites docs/findings.md between its markers from the same results (MLflow's part, the
    scoring and the runs it ships, stood in for by the committed board)."""
    import shutil

    import benchmark.leaderboard.build as build
    import benchmark.leaderboard.published
    from benchmark.leaderboard.files import read_results
    from benchmark.leaderboard.findings import CALIBRATION_FILES, FINDINGS_END, FINDINGS_START
    from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT

    board, committed = tmp_path / "leaderboard", (REPO_ROOT / "docs" / "findings.md").read_text()
    board.mkdir()
    for name in CALIBRATION_FILES:
        shutil.copy(LEADERBOARD_DIR / name, board / name)
    (tmp_path / "docs").mkdir()
    start, end = committed.index(FINDINGS_START) + len(FINDINGS_START), committed.index(FINDINGS_END)
    (tmp_path / "docs" / "findings.md").write_text(committed[:start] + "\nstale\n" + committed[end:])
    monkeypatch.setattr(build, "LEADERBOARD_DIR", board)
    monkeypatch.setattr(build, "score_from_mlflow", lambda *a: read_results(LEADERBOARD_DIR / "results.json"))
    monkeypatch.setattr(benchmark.leaderboard.published, "export_runs", lambda results, out_dir: 0)
    build.build(board)
    assert (tmp_path / "docs" / "findings.md").read_text() == committed


def test_the_methods_table_counts_what_it_says():
    """docs/methods.md: at least 15 methods, each marked yes, partly or no, and the stated counts are the table's."""
    import re

    from benchmark.paths import REPO_ROOT

    text = (REPO_ROOT / "docs" / "methods.md").read_text()
    rows = [line.split(" | ") for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| method")]
    statuses = [cells[2].split(" ")[0] for cells in rows]
    assert len(rows) >= 15 and set(statuses) <= {"yes", "partly", "no"}
    stated = dict((k, int(n)) for n, k in re.findall(r"(\d+) (yes|partly|no)\b", text.split("Counted by row:")[1][:60]))
    assert stated == {k: statuses.count(k) for k in ("yes", "partly", "no")}
