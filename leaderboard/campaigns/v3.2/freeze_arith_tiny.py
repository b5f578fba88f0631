"""Freeze campaign v3.2's arith-tiny target with the release's own code, on the workload as the campaign runs it.

The release's runner (benchmark/cli/campaign.py, freeze_targets) handed freeze_target the workload's name, which it
loads without the campaign's overrides (version 2, target seeds 10-13), and stopped: "no finished on_policy runs of
workload arith-tiny version 2 ... on seeds 10, 11, 12, 13". This does what the runner meant: the same call, with the
workload that the campaign's target runs were made on (its overrides applied: version 3, target seeds 20-23).
Run from the release's checkout (README.md beside this file says how).
"""
import json
import sys

import benchmark.workload
from benchmark.campaign import load_campaign
from benchmark.cli.campaign import campaign_runs, made_by, phase_specs_for, reference_workload
from benchmark.leaderboard.targets import freeze_target, target_path
from benchmark.tracking import code_version

campaign = load_campaign(sys.argv[1])
assert code_version() == campaign.release, code_version()
workload = "arith-tiny"
as_run = reference_workload(campaign, workload)
load_file = benchmark.workload.load_workload
benchmark.workload.load_workload = lambda name, overrides=None: (
    as_run if name == workload and not overrides else load_file(name, overrides))
done = campaign_runs(campaign)
specs = phase_specs_for(campaign, "target", done, workload)
assert specs and all((s.workload.name, s.group_key(), s.seed) in done for s, _ in specs), "target runs missing"
target = freeze_target(workload, made_by(campaign, workload, "target"), campaign.targets_dir(),
                       group=specs[0][0].group_key(), rules=campaign.rules)
print(target_path(workload, campaign.targets_dir()))
print(json.dumps({k: target[k] for k in ("workload_version", "target_seeds", "run_ids", "target_accuracy",
                                         "reference_compute_to_target", "code_version", "rules_version", "flags")},
                 indent=1))
