"""`replaybench campaign run FILE` and `replaybench campaign status FILE`: a pre-registered campaign
(benchmark/campaign.py), phase after phase, resumable and parallel, only ever on the engine release it names."""

from __future__ import annotations

from pathlib import Path

from benchmark.campaign import PHASES, Campaign, CampaignError, load_campaign, superseded
from benchmark.cli.options import console
from benchmark.cli.runs import (
    add_jobs_option,
    jobs_of,
    print_reproduction,
    run_all,
    time_estimate,
    track_tags,
    wall_seconds_per_unit,
)
from benchmark.cli.tune import entry_of, picked, trial_specs
from benchmark.leaderboard.store import finished_runs
from benchmark.leaderboard.targets import REFERENCE, freeze_target, load_target, target_path


class Waiting(CampaignError):
    """A phase whose runs depend on runs of an earlier phase that are not all in yet."""


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("campaign", help="a pre-registered campaign (leaderboard/campaigns/*.yaml): `run` "
                                               "it, resumable, on its engine release; `status` says what is left")
    sub = p.add_subparsers(dest="campaign_command", required=True)
    run = sub.add_parser("run", help="run the campaign's phases in order, skipping finished runs")
    run.add_argument("file", type=Path)
    add_jobs_option(run)
    run.set_defaults(func=cmd_run, executor="sim")
    status = sub.add_parser("status", help="each phase's runs done and left, and the time left")
    status.add_argument("file", type=Path)
    add_jobs_option(status)
    status.set_defaults(func=cmd_status, executor="sim")
    ship = sub.add_parser("ship", help="ship every run the campaign has started so far (finished, failed or "
                                       "interrupted) with the published board, listed by phase")
    ship.add_argument("file", type=Path)
    ship.set_defaults(func=cmd_ship)
    again = sub.add_parser("reproduce", help="make the reference's scored runs again on some of the campaign's "
                                             "scored seeds, each set beside its shipped run digit for digit",
                           epilog="the campaign's runs first: replaybench leaderboard import-runs")
    again.add_argument("file", type=Path)
    again.add_argument("--seeds", type=int, nargs="+", metavar="S",
                       help="scored seeds to make again (default: each workload's first 2)")
    again.add_argument("--workloads", nargs="+", metavar="W", help="only these of the campaign's workloads")
    add_jobs_option(again)
    again.set_defaults(func=cmd_reproduce, executor="sim")


def on_release(campaign: Campaign) -> bool:
    """Whether this process runs the release's engine: its commit, with no uncommitted change to the engine."""
    from benchmark.tracking import code_version

    return code_version() == campaign.release


def run_on_release(campaign: Campaign, file: Path, jobs: int | None) -> int:
    """The same command, run by the release's own engine: from a clean checkout of the release (a git worktree
    under .campaign/, made once), into this checkout's store."""
    import subprocess
    import sys

    from benchmark import kernels
    from benchmark.paths import REPO_ROOT
    from benchmark.tracking import RUNS_DIR, tracking_uri

    worktree = REPO_ROOT / ".campaign" / campaign.release[:12]
    if not worktree.is_dir():
        made = subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(worktree),
                               campaign.release], capture_output=True, text=True)
        if made.returncode:
            raise CampaignError(f"the campaign {campaign.name} runs only on its release {campaign.release}, and no "
                                f"checkout of it could be made here ({made.stderr.strip().splitlines()[-1:]}): fetch "
                                "that commit, or run the command from a clean checkout of it")
    reach_submissions_by_name(campaign, worktree)
    console.print(f"campaign {campaign.name}: running on its release {campaign.release[:12]}, from {worktree}")
    env = {**kernels.environment(campaign.kernels), "PYTHONPATH": str(worktree),
           "REPLAYBENCH_RUNS_DIR": str(RUNS_DIR), "MLFLOW_TRACKING_URI": tracking_uri()}
    command = [sys.executable, "-m", "benchmark.cli", "campaign", "run", str(file.resolve()),
               *(["--jobs", str(jobs)] if jobs else [])]
    return run_until_stopped(command, cwd=worktree, env=env)


def reach_submissions_by_name(campaign: Campaign, worktree: Path) -> None:
    """A link <name> -> <folder> at the root of the release's checkout for each submission the campaign names by its
    folder. The release of v3.2 names the confirmed entries by their runs' names and looks for a submission of that
    name from there (docs/protocols/confirmation.md, "a submission among the confirmed entries"); the link changes
    no file of the release."""
    for name in campaign.entries:
        entry, isolated = entry_of(name)
        link = worktree / entry.name
        if isolated and (worktree / name).is_dir() and not (link.exists() or link.is_symlink()):
            link.symlink_to(Path(name), target_is_directory=True)


def run_until_stopped(command: list[str], **popen) -> int:
    """The child's exit status. Ctrl-C (or SIGTERM) here reaches the child once, as SIGINT, and the child is waited
    for while it records its interrupted runs; a second one ends the child's whole process group."""
    import os
    import signal
    import subprocess

    # its own session: a terminal's Ctrl-C reaches it only through this process, so exactly once. subprocess.run
    # would SIGKILL it 0.25 s after a Ctrl-C, leaving its pool's workers (which ignore SIGINT) running orphaned.
    # SIGINT's default handling in the child: started in the background (`nohup ... &`), this process ignores SIGINT
    # and the child would inherit that, so the SIGINT forwarded to it would not stop it.
    child = subprocess.Popen(command, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen)
    try:
        return child.wait()
    except KeyboardInterrupt:  # the child says it was interrupted, and how to go on
        child.send_signal(signal.SIGINT)
        try:
            return child.wait()
        except KeyboardInterrupt:
            os.killpg(child.pid, signal.SIGTERM)
            child.wait()
            return 130


def require_kernels(campaign: Campaign) -> None:
    from benchmark import kernels

    here = kernels.in_force()
    if here["kernels"] != campaign.kernels:
        fix = ("unset REPLAYBENCH_KERNELS, MKL_CBWR and ATEN_CPU_CAPABILITY" if campaign.kernels == "portable"
               else "set REPLAYBENCH_KERNELS=native")
        raise CampaignError(f"the campaign {campaign.name} computes with {campaign.kernels} kernels, this process "
                            f"with {here['kernels']} ones (ATen {here['aten_capability']}, MKL_CBWR "
                            f"{here['mkl_cbwr']}): {fix}")


def name_of(workload: str) -> str:
    """A workload's name, from its name or the path of its file."""
    from benchmark.workload import load_workload

    return load_workload(workload).name


def made_by(campaign: Campaign, workload: str, phase: str | None = None) -> list:
    """The finished runs of the workload the campaign made on its release (in one phase, or any)."""
    return [r for r in finished_runs(name_of(workload)) if campaign.made(r, phase)]


def campaign_runs(campaign: Campaign) -> dict[tuple[str, str, int], dict]:
    """(workload name, group, seed) -> the first finished run the campaign made on its release (summary, run id)."""
    done = {}
    for workload in campaign.workloads:
        for r in made_by(campaign, workload):
            done.setdefault((r.workload, r.group, r.seed), {**r.summary, "mlflow_run_id": r.run_id})
    return done


def _specs_at(entry, isolated: bool, workload: str, seeds: list[int], campaign: Campaign, phase: str) -> list:
    from benchmark.runner import RunSpec

    w = entry.workload_for(workload, overrides=campaign.workloads[workload].overrides)
    tags = {**track_tags(entry.track), **campaign.tag(phase)}
    return [RunSpec(w, entry.strategy, entry.strategy_params(), seed, isolated=isolated, name=entry.name, tags=tags)
            for seed in seeds]


def _pick(campaign: Campaign, done: dict, workload: str, name: str):
    """The entry as it is scored on the workload: its own settings, or on a workload with tuning its picked trial
    (Waiting until its trials, and for an entry other than the reference the target, are in)."""
    entry, isolated = entry_of(name)
    overrides = campaign.workloads[workload].overrides
    w = entry.workload_for(workload, overrides=overrides)
    if w.tuning.trials < 1:
        return entry, isolated
    trials = trial_specs(entry, isolated, workload, overrides)
    workload_name = name_of(workload)
    finished = {(g, s): r for (w, g, s), r in done.items() if w == workload_name}
    target = None
    if name != REFERENCE:
        if not target_path(workload_name, campaign.targets_dir()).is_file():
            raise Waiting(f"{name} on {workload} waits for the target (phase target)")
        target = load_target(workload_name, campaign.targets_dir())["target_accuracy"]
    result = picked(entry, trials, finished, w.budget, target)
    if result["picked"] is None:
        raise Waiting(f"{name} on {workload} waits for its tuning trials")
    return trials[result["picked"]][0], isolated


def phase_specs(campaign: Campaign, phase: str, done: dict) -> list[tuple]:
    """The phase's (run spec, label) pairs; Waiting when they depend on runs not yet in."""
    out = []
    for workload, seeds in campaign.workloads.items():
        tuned = reference_workload(campaign, workload).tuning.trials > 0
        if phase in ("tuning-reference", "tuning") and tuned:
            names = [REFERENCE] if phase == "tuning-reference" else [n for n in campaign.entries if n != REFERENCE]
            for name in names:
                entry, isolated = entry_of(name)
                for i, (_, specs) in enumerate(trial_specs(entry, isolated, workload, seeds.overrides)):
                    for s in specs:
                        s.tags.update(campaign.tag(phase))
                        out.append((s, f"{workload} {name} trial {i + 1} seed {s.seed}"))
        elif phase == "target":
            entry, isolated = _pick(campaign, done, workload, REFERENCE)
            out += [(s, f"{workload} {REFERENCE} target seed {s.seed}")
                    for s in _specs_at(entry, isolated, workload, seeds.target_seeds, campaign, phase)]
        elif phase == "scored":
            for name in campaign.entries:
                entry, isolated = _pick(campaign, done, workload, name)
                out += [(s, f"{workload} {name} seed {s.seed}")
                        for s in _specs_at(entry, isolated, workload, seeds.scored_seeds, campaign, phase)]
        elif phase == "variants":
            for v in [v for v in campaign.variants if not v.workloads or workload in v.workloads]:
                entry, isolated = _variant(v)
                out += [(s, f"{workload} {entry.name} ({entry.workers},{entry.trainers}) N={entry.buffer_size} seed "
                            f"{s.seed}") for s in _specs_at(entry, isolated, workload, seeds.scored_seeds, campaign,
                                                            phase)]
        elif phase == "confirmation":
            if _left(phase_specs_for(campaign, "scored", done, workload), done):
                raise Waiting(f"the confirmation on {workload} waits for every scored run")
            for name in [REFERENCE, *top_entries(campaign, workload, done)]:
                entry, isolated = _pick(campaign, done, workload, name)
                out += [(s, f"{workload} {name} confirmation seed {s.seed}")
                        for s in _specs_at(entry, isolated, workload, seeds.confirmation_seeds, campaign, phase)]
    return out


def _variant(v):
    import dataclasses

    entry, isolated = entry_of(v.entry)
    changes = {}
    if v.split:
        changes["workers"], changes["trainers"] = map(int, v.split.split(","))
    if v.buffer_size:
        changes["buffer_size"] = v.buffer_size
    return dataclasses.replace(entry, **changes), isolated


def top_entries(campaign: Campaign, workload: str, done: dict) -> list[str]:
    """The campaign's `confirm_top` best-ranked entries on the workload's scored board, named as the campaign file
    names them: a submission by its folder (its runs carry the name in its submission.yaml, which entry_of does not
    take)."""
    from benchmark.leaderboard.build import build_results

    name = name_of(workload)
    scored = made_by(campaign, workload, "scored")  # the ranked board: no variant, no tuning trial
    results = build_results(scored, {name: load_target(name, campaign.targets_dir())}, rules=campaign.rules,
                            resamples=200)
    in_campaign_file = {entry_of(n)[0].name: n for n in campaign.entries}
    ranked = [in_campaign_file[e["name"]] for e in sorted(results["entries"], key=lambda e: e["rank"])
              if e["name"] != REFERENCE]
    return list(dict.fromkeys(ranked))[:campaign.confirm_top]


def freeze_targets(campaign: Campaign, done: dict) -> None:
    """Each workload's target, once its target runs are all in (never frozen again)."""
    for workload in campaign.workloads:
        name = name_of(workload)
        if target_path(name, campaign.targets_dir()).is_file():
            continue
        specs = phase_specs_for(campaign, "target", done, workload)
        if specs and not _left(specs, done):
            freeze_target(reference_workload(campaign, workload), made_by(campaign, workload, "target"),
                          campaign.targets_dir(), group=specs[0][0].group_key(), rules=campaign.rules)
            console.print(f"{name}: target frozen into {target_path(name, campaign.targets_dir())}")


def phase_specs_for(campaign: Campaign, phase: str, done: dict, workload: str) -> list[tuple]:
    workload_name = name_of(workload)
    return [(s, label) for s, label in phase_specs(campaign, phase, done) if s.workload.name == workload_name]


def _left(specs: list[tuple], done: dict) -> list[tuple]:
    return [(s, label) for s, label in specs if (s.workload.name, s.group_key(), s.seed) not in done]


def reference_workload(campaign: Campaign, workload: str):
    """The workload as the campaign runs it (its overrides applied), as the reference sees it."""
    return entry_of(REFERENCE)[0].workload_for(workload, overrides=campaign.workloads[workload].overrides)


def planned(campaign: Campaign, phase: str, workload: str) -> int:
    """How many runs the phase makes on the workload, known before any of them, whatever the tuning picks."""
    c = campaign.workloads[workload]
    if phase in ("tuning-reference", "tuning"):
        if reference_workload(campaign, workload).tuning.trials < 1:
            return 0
        names = [REFERENCE] if phase == "tuning-reference" else [n for n in campaign.entries if n != REFERENCE]
        return sum(len(specs) for n in names for _, specs in trial_specs(*entry_of(n), workload, c.overrides))
    if phase == "target":
        return len(c.target_seeds)
    if phase == "scored":
        return len(campaign.entries) * len(c.scored_seeds)
    if phase == "variants":
        return sum(not v.workloads or workload in v.workloads for v in campaign.variants) * len(c.scored_seeds)
    return (1 + min(campaign.confirm_top, len(campaign.entries) - 1)) * len(c.confirmation_seeds)


def forecast(campaign: Campaign, jobs: int) -> str:
    """The whole campaign up front: its runs, those done, and the time left at `jobs` runs at a time, from the
    median wall time of the workload's finished runs in this store (a run of any entry) made with the campaign's CPU
    kernels where there are some."""
    import statistics

    total = made = 0
    seconds = 0.0
    unknown = []
    settings = {w: reference_workload(campaign, w) for w in campaign.workloads}
    rates = wall_seconds_per_unit([w.name for w in settings.values()], campaign.kernels)
    for workload, w in settings.items():
        w_total = sum(planned(campaign, phase, workload) for phase in PHASES)
        w_made = len({(r.group, r.seed, r.campaign) for r in made_by(campaign, workload)})
        total, made = total + w_total, made + min(w_made, w_total)
        rate = rates.get((w.name, None))
        if rate:
            seconds += max(w_total - w_made, 0) * statistics.median(rate) * w.budget
        else:
            unknown.append(w.name)
    line = f"campaign {campaign.name}: {total} runs in all, {made} done, {total - made} left"
    if unknown:
        return line + f" (no finished run of {', '.join(unknown)} in this store to estimate the time from)"
    return line + f": about {seconds / max(jobs, 1) / 3600:.1f} hours at {jobs} at a time on this machine"


def cmd_run(args) -> int:
    campaign = load_campaign(args.file)
    by = superseded(campaign.file().parent).get(campaign.name)
    if by:
        raise CampaignError(f"the campaign {campaign.name} is superseded by {by['by']} ({by['why']}): run "
                            f"{campaign.file().parent / (by['by'] + '.yaml')} instead; its runs so far stay shipped")
    if not on_release(campaign):
        return run_on_release(campaign, args.file, args.jobs)
    require_kernels(campaign)
    console.print(forecast(campaign, jobs_of(args)))
    failures = 0
    for phase in PHASES:
        done = campaign_runs(campaign)
        todo = _left(phase_specs(campaign, phase, done), done)
        console.print(f"campaign {campaign.name}, phase {phase}: {len(todo)} runs to make")
        if todo:
            failures += sum(isinstance(o, Exception) for o in run_all(todo, jobs_of(args)))
        if phase == "target":
            freeze_targets(campaign, campaign_runs(campaign))
    console.print(f"campaign {campaign.name}: every phase done" + (f", {failures} runs failed (on record)"
                                                                    if failures else ""))
    return 1 if failures else 0


def phase_progress(campaign: Campaign) -> list[tuple[str, list[tuple] | None, list[tuple] | Waiting]]:
    """Each phase with its (run spec, label) pairs and those of them left; or, in place of the left ones, what it
    waits for, when its runs depend on runs not yet in (its pairs then None)."""
    done = campaign_runs(campaign)
    out = []
    for phase in PHASES:
        try:
            specs = phase_specs(campaign, phase, done)
        except Waiting as wait:
            out.append((phase, None, wait))
            continue
        out.append((phase, specs, _left(specs, done)))
    return out


def unfinished_phases(campaign: Campaign) -> list[str]:
    """The phases with runs left, each as "phase (what is left)"; empty when the campaign is done."""
    return [f"{phase} (waits: {left})" if specs is None else f"{phase} ({len(left)} of {len(specs)} runs left)"
            for phase, specs, left in phase_progress(campaign) if specs is None or left]


def cmd_status(args) -> int:
    campaign = load_campaign(args.file)
    left_all = []
    for phase, specs, left in phase_progress(campaign):
        if specs is None:
            console.print(f"{phase}: waits ({left})")
            continue
        left_all += left
        console.print(f"{phase}: {len(specs) - len(left)} of {len(specs)} runs done")
    if left_all:
        console.print("left, of the phases that can be planned now: " + time_estimate(left_all, jobs_of(args)))
    console.print(forecast(campaign, jobs_of(args)))
    return 0


def reproduction_specs(campaign: Campaign, seeds: list[int] | None, workloads: list[str] | None) -> list[tuple]:
    """The reference at its scored configuration on each workload (its pick, read from the campaign's tuning runs
    in this store), on the given scored seeds; untagged: a run made again is not the campaign's."""
    from benchmark.runner import RunSpec

    names = {name_of(w): w for w in campaign.workloads}
    unknown = sorted(set(workloads or []) - set(names))
    if unknown:
        raise CampaignError(f"{', '.join(unknown)}: not a workload of the campaign {campaign.name} "
                            f"({', '.join(names)})")
    chosen = {}
    for name, workload in names.items():
        scored = campaign.workloads[workload].scored_seeds
        if not workloads or name in workloads:
            chosen[workload] = scored[:2] if seeds is None else seeds
        if set(chosen.get(workload, [])) - set(scored):
            raise CampaignError(f"seeds {', '.join(map(str, sorted(set(chosen[workload]) - set(scored))))} are not "
                                f"scored seeds of {name} in the campaign {campaign.name} (those are "
                                f"{', '.join(map(str, scored))})")
    done = campaign_runs(campaign)
    if not done:
        raise CampaignError(f"this store holds none of the campaign {campaign.name}'s runs: `replaybench leaderboard "
                            "import-runs` loads the shipped ones (seconds)")
    out = []
    for workload, workload_seeds in chosen.items():
        try:
            entry, isolated = _pick(campaign, done, workload, REFERENCE)
        except Waiting as wait:
            raise CampaignError(f"{wait}: nothing to make again yet") from None
        w = entry.workload_for(workload, overrides=campaign.workloads[workload].overrides)
        out += [(RunSpec(w, entry.strategy, entry.strategy_params(), seed, isolated=isolated, name=entry.name,
                         tags=track_tags(entry.track)),
                 f"{w.name} {REFERENCE} ({w.pipeline.workers},{w.pipeline.trainers}) seed {seed}")
                for seed in workload_seeds]
    return out


def cmd_reproduce(args) -> int:
    """The campaign's reference runs made again by this checkout's engine, each beside its shipped twin: the
    published rows are computed from the shipped runs, so a twin equal digit for digit reproduces its share."""
    campaign = load_campaign(args.file)
    require_kernels(campaign)
    runs = reproduction_specs(campaign, args.seeds, args.workloads)
    outcomes = run_all(runs, jobs_of(args))
    print_reproduction([o for o in outcomes if isinstance(o, dict)])
    return 1 if any(isinstance(o, Exception) for o in outcomes) else 0


def started_runs(campaign: Campaign) -> dict[str, list[str]]:
    """Phase -> the ids of every run in this store the campaign started, whatever became of it; a run loaded by
    `import-runs` by its published id, so that it is never shipped twice."""
    from benchmark.leaderboard.published import PUBLISHED_ID_TAG
    from benchmark.tracking import TAG, find_runs

    by_phase: dict[str, list[str]] = {}
    for workload in campaign.workloads:
        for r in find_runs(name_of(workload), f"tags.`{TAG}campaign` LIKE '{campaign.name}/%'"):
            by_phase.setdefault(r.data.tags[f"{TAG}campaign"].split("/", 1)[1], []).append(
                r.data.tags.get(PUBLISHED_ID_TAG, r.info.run_id))
    return by_phase


def shipped_list_file(campaign: Campaign) -> Path:
    """leaderboard/measurements/campaign-<name>.json: the campaign's shipped runs, by phase."""
    from benchmark.leaderboard.published import MEASUREMENTS
    from benchmark.paths import LEADERBOARD_DIR

    return LEADERBOARD_DIR / MEASUREMENTS / f"campaign-{campaign.name}.json"


def shipped_runs_by_phase(campaign: Campaign) -> dict[str, list[str]]:
    """Phase -> the ids of the campaign's runs shipped in leaderboard/runs/ (empty before its first `ship`)."""
    import json

    path = shipped_list_file(campaign)
    return json.loads(path.read_text())["run_ids"] if path.is_file() else {}


def cmd_ship(args) -> int:
    """leaderboard/measurements/campaign-<name>.json lists the runs by phase (those shipped before and no longer in
    this store stay listed), and each one's folder goes into leaderboard/runs/: a campaign spanning days is never
    held only in one machine's store."""
    import json

    from benchmark.leaderboard.published import ship_runs
    from benchmark.paths import LEADERBOARD_DIR

    campaign = load_campaign(args.file)
    path = shipped_list_file(campaign)
    listed = shipped_runs_by_phase(campaign)
    for phase, ids in started_runs(campaign).items():
        listed[phase] = sorted(set(listed.get(phase, [])) | set(ids))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"campaign": campaign.name, "release": campaign.release,
                                "run_ids": dict(sorted(listed.items()))}, indent=1) + "\n")
    every = sorted({i for ids in listed.values() for i in ids})
    written = ship_runs(every, LEADERBOARD_DIR)
    console.print(f"campaign {campaign.name}: {len(every)} runs listed in {path}, {written} written into "
                  f"{LEADERBOARD_DIR / 'runs'}")
    return 0
