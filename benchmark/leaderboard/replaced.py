"""The boards a published board replaced, kept beside it in leaderboard/replaced/<board>/: each one's results.json
as it was published, its targets, and its table and page rendered again from it, their links into the runs folder
the boards share. A shipped run stays shipped whatever board replaces the one that named it (published.export_runs), so
every shipped run stays listed on a page."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.files import read_results
from benchmark.leaderboard.page import render_html
from benchmark.leaderboard.published import RUNS_FOLDER
from benchmark.leaderboard.render import render_markdown, rules_version

REPLACED_FOLDER = "replaced"  # inside the published board's folder


def board_name(results: dict) -> str:
    """A campaign's board is its campaign's name; a board of every frozen target is its rules version ("v2")."""
    campaign = results.get("campaign")
    return campaign["name"] if campaign else f"v{rules_version(results)}"


def replaced_board_files(results: dict, board_dir: Path) -> tuple[list[dict], dict[Path, str]]:
    """What the board about to be published in board_dir replaces: the records for its results'
    "replaced_boards", and the files that keep the board in force there when it is another board. Rebuilding the
    same board keeps the records it had and writes nothing more."""
    in_force = board_dir / "results.json"
    if not in_force.is_file():
        return [], {}
    text = in_force.read_text()
    try:
        old = read_results(in_force)
        name = board_name(old)
        record = {"board": name, "folder": f"{REPLACED_FOLDER}/{name}", "rules": rules_version(old),
                  "generated": old["generated"], "code_version": old["code_version"]}
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise LeaderboardError(f"{in_force}, the board in force, cannot be read ({exc!r}): restore it from "
                               "git (`git checkout -- leaderboard/results.json`); no leaderboard file was changed"
                               ) from None
    kept = old.get("replaced_boards", [])
    new_name = board_name(results)
    if name == new_name:
        return kept, {}
    folder = board_dir / REPLACED_FOLDER / name
    if (folder / "results.json").is_file() and (folder / "results.json").read_text() != text:
        raise LeaderboardError(f"{folder} already keeps another board named {name}: move that folder aside (it is "
                               "in git), then publish again; no leaderboard file was changed")
    shown = {**old, "runs_folder": f"../../{old.get('runs_folder') or RUNS_FOLDER}",
             "replaced_by": {"board": new_name, "generated": results["generated"]}}
    files = {folder / "results.json": text, folder / "LEADERBOARD.md": render_markdown(shown),
             folder / "index.html": render_html(shown)}
    for workload, facts in old["workloads"].items():  # its targets, which the targets in force may replace
        target = board_dir.parent / facts.get("target_file", "")
        if target.is_file():
            files[folder / "targets" / f"{workload}.json"] = target.read_text()
    return [*kept, record], files


def targets_in_force_files(results: dict, campaign, board_dir: Path) -> dict[Path, str]:
    """A campaign's board published: its targets become the ones in force, board_dir/targets/, which a plain
    build, a submission's preview and tuning score against (each a copy of the campaign's frozen file)."""
    if campaign is None:
        return {}
    return {board_dir / "targets" / f"{w}.json": (campaign.targets_dir() / f"{w}.json").read_text()
            for w in results["workloads"]}
