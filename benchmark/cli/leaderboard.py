"""`replaybench leaderboard`: the ranked table from MLflow, and its `build`, `serve` and `freeze-target`
subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from benchmark.leaderboard import LeaderboardError
from benchmark.leaderboard.build import build, local_board_dir, refuse_on_the_published_board, score_from_mlflow
from benchmark.leaderboard.render import highlighted_keys, print_leaderboard
from benchmark.leaderboard.serve import serve
from benchmark.leaderboard.targets import REFERENCE, freeze_target, target_path
from benchmark.paths import LEADERBOARD_DIR
from benchmark.submission import DEFAULT_TRACK
from benchmark.tracking import tracking_uri
from benchmark.workload import load_workload


def add_parsers(subparsers) -> None:
    parser = subparsers.add_parser("leaderboard",
                                   help="ranked table from MLflow; `build` writes your board, runs/leaderboard/ "
                                        "(--publish: leaderboard/); `serve`, `import-runs`, `freeze-target`")
    parser.add_argument("--workload", help="score this workload only (default: every workload with a target)")
    parser.add_argument("--track",
                        help=f"only runs tagged replaybench.track=TRACK (untagged runs are '{DEFAULT_TRACK}')")
    parser.add_argument("--targets", type=Path, help=argparse.SUPPRESS)  # tests: another targets folder
    parser.add_argument("--highlight", metavar="NAME",
                        help="mark your entry (its name, label or key), in bold with \"(yours)\"")
    parser.set_defaults(func=cmd_leaderboard)
    sub = parser.add_subparsers(dest="leaderboard_command")
    p = sub.add_parser("build", help="write results.json, LEADERBOARD.md and index.html (default: runs/leaderboard/)",
                       description="Write the board from MLflow: results.json, LEADERBOARD.md and index.html. By "
                                   "default into runs/leaderboard/ (your local board); --publish writes the "
                                   "published board, leaderboard/, and refuses unless the store holds the runs "
                                   "behind its targets.",
                       epilog="example: replaybench leaderboard build && replaybench leaderboard serve "
                              "--dir runs/leaderboard")
    p.add_argument("--workload", default=argparse.SUPPRESS)
    p.add_argument("--track", default=argparse.SUPPRESS)
    p.add_argument("--targets", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--highlight", metavar="NAME", default=argparse.SUPPRESS,
                   help="mark your entry (its name, label or key) on the page, and plot its curve whatever its "
                        "rank; not with --publish")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="output folder (default: runs/leaderboard/)")
    where.add_argument("--publish", action="store_true", help="write the published board, leaderboard/")
    p.add_argument("--force", action="store_true",
                   help="with --publish: write it even from a store without the target's reference runs, or "
                        "with --campaign before the campaign is done")
    p.add_argument("--rules", type=int, choices=[2, 3],
                   help="score under this rules version (default: the one the targets were frozen with); "
                        "not with --publish")
    p.add_argument("--campaign", type=Path, metavar="FILE",
                   help="the board of a campaign (leaderboard/campaigns/*.yaml): its scored runs against the "
                        "targets it froze, and every campaign run listed by what it was for")
    p = sub.add_parser("serve", help="serve the leaderboard page on http://127.0.0.1:PORT (Ctrl-C stops)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--dir", type=Path, help="folder to serve (default: leaderboard/)")
    p = sub.add_parser("import-runs", help="load the runs shipped with the published board into your MLflow store",
                       epilog="example: replaybench leaderboard import-runs && replaybench leaderboard build")
    p.add_argument("folder", nargs="?", type=Path, help="the shipped runs (default: leaderboard/runs/)")
    p = sub.add_parser("freeze-target", help="freeze a workload's target accuracy from its reference runs (once)")
    p.add_argument("--workload", required=True)
    p.add_argument("--group", help="the reference configuration (replaybench.group) when there are several")
    p.add_argument("--force", action="store_true", help="replace an existing target (changes every score)")
    p.add_argument("--targets", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def cmd_leaderboard(args) -> int:
    """0, or 2 with the fix on stderr."""
    err = Console(stderr=True)
    action = getattr(args, "leaderboard_command", None)
    targets_dir = getattr(args, "targets", None)
    try:
        if getattr(args, "workload", None) and action != "freeze-target":
            args.workload = load_workload(args.workload).name  # a name or a path; an unknown one: the known names
        if action == "freeze-target":
            t = freeze_target(args.workload, targets_dir=targets_dir, group=args.group, force=args.force)
            err.print(f"froze {target_path(t['workload'], targets_dir)}: target accuracy {t['target_accuracy']:.4f} "
                      f"(= {t['target_fraction']} x {t['median_best_accuracy']:.4f}, the maximum of the median curve "
                      f"of {len(t['run_ids'])} {REFERENCE} runs over the first {t['target_horizon']:.0%} of the "
                      f"budget), reference compute-to-target {t['reference_compute_to_target']:,.0f}"
                      + (f"; [yellow]{'; '.join(t['flags'])}[/]" if t["flags"] else ""))
            return 0
        if action == "build":
            out = LEADERBOARD_DIR if args.publish else Path(args.out) if args.out else local_board_dir()
            campaign = None
            if args.publish:  # arguments the published board refuses, before the campaign's state is read
                refuse_on_the_published_board(args.rules, args.highlight, None)
            if args.publish and not args.campaign:
                args.campaign = published_campaign_file()
                if args.campaign:
                    err.print(f"the published board is a campaign's: rebuilt as its board (--campaign {args.campaign})")
            if args.campaign:
                from benchmark.campaign import CampaignError, load_campaign

                try:
                    campaign = load_campaign(args.campaign)
                except CampaignError as exc:
                    raise LeaderboardError(str(exc)) from None
                if args.publish and not args.force:
                    require_done(campaign, args.campaign)
            results = build(out, args.workload, args.track, targets_dir, force=args.force, highlight=args.highlight,
                            rules=args.rules, campaign=campaign)
            print_leaderboard(results, highlight=args.highlight)
            warn_unmatched(err, results, args.highlight)
            err.print(f"wrote {out / 'results.json'}, {out / 'LEADERBOARD.md'} and {out / 'index.html'} "
                      f"(open it, or `replaybench leaderboard serve --dir {out}`)")
            return 0
        if action == "import-runs":
            from benchmark.leaderboard.published import RUNS_FOLDER, import_runs

            imported, present = import_runs(args.folder or LEADERBOARD_DIR / RUNS_FOLDER)
            err.print(f"imported {imported} runs into {tracking_uri()} ({present} already there); "
                      "`replaybench leaderboard build` now scores them with yours")
            return 0
        if action == "serve":
            return serve(Path(args.dir) if args.dir else LEADERBOARD_DIR, args.port)
        results = score_from_mlflow(args.workload, args.track, targets_dir)
        print_leaderboard(results, highlight=args.highlight)
        warn_unmatched(err, results, args.highlight)
        return 0
    except LeaderboardError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 2


def published_campaign_file() -> Path | None:
    """The campaign whose board leaderboard/ is, if any: a plain --publish rebuilds that board, never replaces it
    with a board of every target."""
    import json

    from benchmark.paths import REPO_ROOT

    results_file = LEADERBOARD_DIR / "results.json"
    campaign = json.loads(results_file.read_text()).get("campaign") if results_file.is_file() else None
    return REPO_ROOT / campaign["file"] if campaign else None


def require_done(campaign, file: Path) -> None:
    """The published board is a campaign's once every phase is in: one made midway would rank what happened to be
    finished (and replace the board in force with it)."""
    from benchmark.cli.campaign import shipped_runs_by_phase, started_runs, unfinished_phases

    left = unfinished_phases(campaign)
    if left and shipped_runs_by_phase(campaign) and not started_runs(campaign):  # a fresh clone's store
        raise LeaderboardError(
            f"this MLflow store lacks the reference runs that set the published target (it holds none of the "
            f"campaign {campaign.name}'s runs): load the published runs first (`replaybench leaderboard "
            "import-runs`), or build the local board (drop --publish; it goes to runs/leaderboard/); no leaderboard "
            "file was changed")
    if left:
        raise LeaderboardError(
            f"the campaign {campaign.name} is not done: {'; '.join(left)}. `replaybench campaign run {file}` makes "
            "the rest; meanwhile build its board elsewhere (--out DIR), or pass --force to publish it as it is; "
            "no leaderboard file was changed")


def warn_unmatched(err: Console, results: dict, highlight: str | None) -> None:
    """--highlight named no ranked entry: say so (a typo, or an entry not ranked, with its reason)."""
    if not highlight or highlighted_keys(results, highlight):
        return
    reasons = [n["reason"] for n in results["not_ranked"] if highlight in (n["key"], n["strategy"])]
    err.print(f"[yellow]note:[/] no ranked entry is named {escape(highlight)}"
              + (f" (not ranked: {escape(reasons[0])})" if reasons else "") + "; nothing is highlighted")
