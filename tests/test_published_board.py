"""The published board is what its shipped runs give: loaded into a fresh store and rebuilt, every number of
`leaderboard/results.json` and every line of `LEADERBOARD.md` comes back, but for when and from which code it
was built."""

import json
import math
import re

from benchmark.cli import main
from benchmark.leaderboard.published import import_runs
from benchmark.paths import LEADERBOARD_DIR, REPO_ROOT

BUILD_FACTS = ("generated", "code_version", "mlflow", "runs_folder", "replaced_boards")  # when, from which code and
# store, and what the published board replaced


def same_numbers(a, b, rel: float = 1e-12) -> bool:
    """a and b hold the same keys, strings and numbers, floats equal but for their last bits: numpy's
    exp and log round differently on CPUs with other vector units (seen: 1.2899318925267438 against
    1.289931892526744), while any real change to a score moves far more than one part in 10^12."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=rel)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_numbers(a[k], b[k], rel) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_numbers(x, y, rel) for x, y in zip(a, b))
    return a == b


def test_same_numbers_tells_a_changed_score_from_rounding():
    assert same_numbers({"s": [1.2899318925267438, "x", 3]}, {"s": [1.289931892526744, "x", 3]})
    assert not same_numbers({"s": [1.2899318925]}, {"s": [1.2899318926]})
    assert not same_numbers({"s": [1.0, "x"]}, {"s": [1.0, "y"]})
    assert not same_numbers({"s": 1.0}, {"s": 1.0, "t": 2})


def test_the_published_board_rebuilds_exactly_from_its_shipped_runs(isolated_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    imported, present = import_runs(LEADERBOARD_DIR / "runs")
    assert imported == len(list((LEADERBOARD_DIR / "runs").glob("*/run.json"))) and present == 0
    committed = json.loads((LEADERBOARD_DIR / "results.json").read_text())
    # a campaign's board is rebuilt as that campaign's, as a plain --publish does
    campaign = ["--campaign", str(REPO_ROOT / committed["campaign"]["file"])] if "campaign" in committed else []
    assert main(["leaderboard", "build", *campaign, "--out", str(tmp_path / "board")]) == 0

    rebuilt = json.loads((tmp_path / "board" / "results.json").read_text())
    assert same_numbers({k: v for k, v in rebuilt.items() if k not in BUILD_FACTS},
                        {k: v for k, v in committed.items() if k not in BUILD_FACTS})

    def without_build_line(text: str) -> list[str]:
        return [line for line in text.splitlines() if not re.match(r"Generated \S+ from .+ \(code ", line)]

    assert without_build_line((tmp_path / "board" / "LEADERBOARD.md").read_text()) == \
        without_build_line((LEADERBOARD_DIR / "LEADERBOARD.md").read_text())


def test_the_readmes_results_are_the_published_boards_generated_not_copied():
    from benchmark.leaderboard.files import read_results
    from benchmark.leaderboard.render import README_END, README_START, readme_results

    readme = (REPO_ROOT / "README.md").read_text()
    block = readme[readme.index(README_START) + len(README_START):readme.index(README_END)]
    assert block.strip() == readme_results(read_results(LEADERBOARD_DIR / "results.json")).strip()


def test_every_v3_claim_is_corrected_and_the_findings_word_each_as_its_verdict():
    """On the published board, scored under rules v3, and docs/findings.md (checked as generated below)."""
    from benchmark.leaderboard.files import read_results
    from benchmark.leaderboard.render import rules_version

    results = read_results(LEADERBOARD_DIR / "results.json")
    assert rules_version(results) == 3
    text = (REPO_ROOT / "docs" / "findings.md").read_text()
    words = {"resolved faster", "resolved slower", "not resolved"}
    swap = {"resolved faster": "resolved slower", "resolved slower": "resolved faster", "not resolved": "not resolved"}
    assert results["claims"] and all(c["verdict"] in words and c["adjusted_p_value"] >= c["p_value"]
                                     for c in results["claims"])
    # every verdict the findings word is one of the claims' (either way round) or one of the variants' against the
    # reference, each corrected in its own family, with its corrected p
    held = {(v, f"{c['adjusted_p_value']:.3f}") for c in results["claims"] for v in (c["verdict"], swap[c["verdict"]])}
    held |= {(v["verdict"], f"{v['adjusted_p_value']:.3f}") for v in results.get("variants", [])}
    worded = re.findall(r"(resolved faster|resolved slower|not resolved) \(corrected p ([0-9.]+), PoI", text)
    assert worded and set(worded) <= held


def test_the_findings_are_the_published_boards_generated_not_copied():
    from benchmark.leaderboard.files import read_results
    from benchmark.leaderboard.findings import FINDINGS_END, FINDINGS_START, read_calibrations, with_findings

    doc = (REPO_ROOT / "docs" / "findings.md").read_text()
    assert FINDINGS_START in doc and FINDINGS_END in doc  # without them nothing would be generated, nor checked
    results = read_results(LEADERBOARD_DIR / "results.json")
    assert with_findings(doc, results, read_calibrations(LEADERBOARD_DIR)) == doc


def test_the_targets_and_workload_files_in_force_are_the_published_boards():
    """A plain build, a submission and its tuning score against leaderboard/targets/ and run the workload files:
    for every workload of the published board, the target it was scored against (a campaign's own, copied there
    when its board is published) and the workload's version."""
    from benchmark.leaderboard.targets import TARGETS_DIR
    from benchmark.workload import load_workload

    published = json.loads((LEADERBOARD_DIR / "results.json").read_text())
    for workload, facts in published["workloads"].items():
        assert (TARGETS_DIR / f"{workload}.json").read_text() == (REPO_ROOT / facts["target_file"]).read_text()
        assert load_workload(workload).version == facts["version"], f"workloads/{workload}.yaml: its version"
