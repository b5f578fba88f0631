"""A campaign (`leaderboard/campaigns/<name>.yaml`): everything a published board is made of, fixed in one file
committed before any of its runs, and made by one engine release.

    name: v3                       # every run is tagged replaybench.campaign = <name>/<phase>
    release: <40-hex commit>       # the engine every run is made by (code_version, never +dirty)
    rules: 3                       # the scoring rules its targets are frozen under
    kernels: portable              # the CPU kernels every run computes with (benchmark/kernels.py; default native)
    seeds_per_arm: 17              # the power analysis' count: each workload's scored seeds, at least 10
    workloads:
      arith-tiny: {version: "3", target_seeds: [...], scored_seeds: [...], confirmation_seeds: [...],
                   overrides: {version: "3", seeds: [...], target_seeds: [...]}}   # over the workload file's
    entries: [on_policy, fifo_uniform, ..., submissions/example_entry]   # baseline names or entry folders
    variants:                      # for the findings, never ranked: an entry at another split or buffer size
      - {entry: fifo_uniform, split: "5,3", buffer_size: 90, workloads: [arith-tiny]}
    confirm_top: 3                 # the entries rerun on the confirmation seeds, with the reference
    supersedes: {v2: why}          # earlier campaigns this one replaces, and why: their runs stay shipped, listed

Its phases, in order (each resumable, each run tagged with its phase): `tuning-reference` (the reference's trials on
a workload with tuning), `target` (the reference at its settings or pick, on the target seeds; then the target is
frozen into <name>/targets/ beside the file), `tuning` (the other entries' trials), `scored` (every entry at
its settings or pick on the scored seeds), `variants`, `confirmation` (the top entries of the scored board and the
reference, on seeds nobody has looked at). The seed sets of a workload are disjoint, and the workload files state
the same scored and target seeds (the scorer reads them there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from benchmark import schema
from benchmark.errors import UserError
from benchmark.paths import LEADERBOARD_DIR

PHASES = ("tuning-reference", "target", "tuning", "scored", "variants", "confirmation")
CAMPAIGNS_DIR = LEADERBOARD_DIR / "campaigns"


MIN_SEEDS_PER_ARM = 10


class CampaignError(UserError):
    """A campaign file that cannot be read, or a campaign that cannot run here; the message names the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CampaignWorkload(_Strict):
    version: str
    target_seeds: list[int]
    scored_seeds: list[int]
    confirmation_seeds: list[int] = []
    # workload settings every run of the campaign takes over the file's (`--set` keys): a new version of a
    # published workload runs in its campaign while the file keeps the version its board was made on, and the file
    # takes these settings when the campaign's board is published
    overrides: dict = {}


class Variant(_Strict):
    entry: str
    split: str | None = Field(None, pattern=r"^\d+,\d+$")
    buffer_size: int | None = Field(None, gt=0)
    workloads: list[str] = []  # the workloads it runs on (default: every workload of the campaign)


class Campaign(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    release: str = Field(pattern=r"^[0-9a-f]{40}$")
    rules: int = 3
    kernels: Literal["portable", "native"] = "native"
    seeds_per_arm: int
    workloads: dict[str, CampaignWorkload]
    entries: list[str] = Field(min_length=1)
    variants: list[Variant] = []
    confirm_top: int = Field(3, ge=0)
    supersedes: dict[str, str] = {}
    _folder: Path = PrivateAttr(default=CAMPAIGNS_DIR)  # the folder of its file
    _path: Path | None = PrivateAttr(default=None)

    def file(self) -> Path:
        return self._path or self._folder / f"{self.name}.yaml"

    def targets_dir(self) -> Path:
        """Beside its file, whichever checkout runs it: the targets are the campaign's, shipped with its file."""
        return self._folder / self.name / "targets"

    def tag(self, phase: str) -> dict:
        return {"campaign": f"{self.name}/{phase}"}

    def made(self, record, phase: str | None = None) -> bool:
        """Whether the campaign made this run (a leaderboard RunRecord): on its release, with its kernels, tagged
        with its name, and with the phase when one is given."""
        tag = record.campaign or ""
        return (record.code_version == self.release and record.kernels == self.kernels
                and (tag == f"{self.name}/{phase}" if phase else tag.startswith(f"{self.name}/")))


def campaign_files(folder: Path | None = None) -> dict[str, dict]:
    """The campaign files of a folder (default: leaderboard/campaigns/), by campaign name, as written, each with
    its path."""
    files = {}
    for path in sorted(Path(folder or CAMPAIGNS_DIR).glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        files[str(data.get("name", path.stem))] = {**data, "path": path}
    return files


def superseded(folder: Path | None = None) -> dict[str, dict]:
    """name -> {"by": the campaign that supersedes it, "why"}, from the campaign files of the folder."""
    return {old: {"by": name, "why": why} for name, data in campaign_files(folder).items()
            for old, why in (data.get("supersedes") or {}).items()}


def load_campaign(path: str | Path) -> Campaign:
    """The campaign file, validated, and checked against the workload files it names."""
    from benchmark.workload import load_workload

    path = Path(path)
    if not path.is_file():
        raise CampaignError(f"campaign file {path} not found (campaigns live in {CAMPAIGNS_DIR})")
    data = yaml.safe_load(path.read_text())
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        raise CampaignError(f"{path}:\n  - " + "\n  - ".join(schema.problems(exc, Campaign, data))) from None
    campaign._folder = path.resolve().parent
    campaign._path = path.resolve()
    problems = [] if campaign.seeds_per_arm >= MIN_SEEDS_PER_ARM else [
        f"seeds_per_arm must be at least {MIN_SEEDS_PER_ARM} (the power analysis' count), not {campaign.seeds_per_arm}"]
    for name, c in campaign.workloads.items():
        w = load_workload(name, c.overrides)
        sets = {"target": c.target_seeds, "scored": c.scored_seeds, "confirmation": c.confirmation_seeds,
                "tuning": w.tuning.seeds}
        seen: dict[int, str] = {}
        for kind, seeds in sets.items():
            for s in seeds:
                if s in seen:
                    problems.append(f"{name}: seed {s} is both a {seen[s]} and a {kind} seed: the sets are disjoint")
                seen.setdefault(s, kind)
        if str(w.version) != c.version:
            problems.append(f"{name}: the campaign names version {c.version}, its file is version {w.version}")
        if list(w.seeds) != c.scored_seeds or list(w.target_seeds) != c.target_seeds:
            problems.append(f"{name}: the workload's seeds and target_seeds (its file's, or the campaign's overrides) "
                            "must be the campaign's scored and target seeds (the scorer reads them there)")
        if len(c.scored_seeds) != campaign.seeds_per_arm:
            problems.append(f"{name}: {len(c.scored_seeds)} scored seeds, not the {campaign.seeds_per_arm} of "
                            "seeds_per_arm")
    problems += _unknown_names(campaign)
    if problems:
        raise CampaignError(f"{path}:\n  - " + "\n  - ".join(problems))
    return campaign


def _unknown_names(campaign: Campaign) -> list[str]:
    """Entries that are neither a baseline nor a submission folder, variants on workloads the campaign lacks."""
    from benchmark.submission import load_baselines, submission_folder

    baselines = load_baselines().entries
    named = campaign.entries + [v.entry for v in campaign.variants]
    problems = [f"entry {n!r} is neither a baseline nor a submission folder" for n in dict.fromkeys(named)
                if n not in baselines and submission_folder(n) is None]
    return problems + [f"variant of {v.entry}: workload {w} is not the campaign's" for v in campaign.variants
                       for w in v.workloads if w not in campaign.workloads]
