"""The regime diagnostic's measurements inside a run (docs/protocols/regime-diagnostic.md): how big a step the
trainers take, and how far the policy moves from the one that generated a rollout in 1, 5 and 9 steps.

Every PROBE_EVERY trainer steps, after the update: the relative change of the matrix weights in that step
(||theta' - theta|| / ||theta||), and for each staleness s in STALENESS, on rollouts the workers generated with
the weights of version (now - s), the current policy's log-probs against their behaviour log-probs. A generation
rarely ends within the step it started in, so the rollouts of one step ago are measured when they arrive, one
step old, for the versions that are multiples of PROBE_EVERY. Each measurement gives the KL(behaviour ||
current) estimate mean(r - 1 - log r) and the share of tokens whose ratio r lies outside the clip range
[1 - eps_low, 1 + eps_high]. A measurement, never a decision: it draws no
random number, changes no weight and is not charged, so a run with the probe is the run without it, plus these
metrics (probe/* in MLflow, `probe` in summary.json: the medians over the second half of the run)."""

from __future__ import annotations

import statistics

import torch

PROBE_EVERY = 5  # trainer steps between measurements: a forward pass of a batch for each staleness
STALENESS = (1, 5, 9)  # the paper's FIFO staleness is 5-9 steps
KEPT_PER_VERSION = 64  # rollouts kept per generating version, to measure later


class StalenessProbe:
    def __init__(self, eps_low: float, eps_high: float):
        self.eps_low, self.eps_high = eps_low, eps_high
        self.by_version: dict[int, list] = {}  # generating version -> rollouts it generated (the first ones)
        self.points: list[dict] = []  # one per measurement: step, compute and the values
        self.one_step_measured: set[int] = set()  # versions whose rollouts were measured one step old
        self._before: list[torch.Tensor] | None = None

    def before_step(self, trainer, step: int) -> None:
        """Keep the matrix weights before the update of `step` when it is to be measured."""
        if (step + 1) % PROBE_EVERY == 0:
            self._before = [p.detach().clone() for p in _matrices(trainer.model)]

    def generated(self, trainer, rollouts: list, version: int, compute: float) -> list[tuple[str, float, int]]:
        """A finished generation, the trainers at `version`: keep its rollouts (while its version has fewer than
        KEPT_PER_VERSION), and measure them now when they are one step old and their version is to be measured."""
        generated_by = rollouts[0].policy_version
        kept = self.by_version.setdefault(generated_by, [])
        kept.extend(rollouts[: KEPT_PER_VERSION - len(kept)])
        if version - generated_by != 1 or generated_by % PROBE_EVERY or generated_by in self.one_step_measured:
            return []
        self.one_step_measured.add(generated_by)
        point = {"step": version, "compute": compute}
        point["kl_s1"], point["clip_s1"] = self._divergence(trainer, rollouts)
        self.points.append(point)
        return [(f"probe/{k}", float(point[k]), version) for k in ("kl_s1", "clip_s1")]

    def after_step(self, trainer, version: int, compute: float) -> list[tuple[str, float, int]]:
        """The trainers just took the update that made `version`; the metrics of this measurement, if any."""
        for old in [v for v in self.by_version if v < version - max(STALENESS)]:
            del self.by_version[old]
        self.one_step_measured = {v for v in self.one_step_measured if v >= version - max(STALENESS)}
        if self._before is None:
            return []
        with torch.no_grad():
            after = _matrices(trainer.model)
            change = torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(after, self._before)))
            size = torch.sqrt(sum((b ** 2).sum() for b in self._before))
        self._before = None
        point = {"step": version, "compute": compute, "relative_update": float(change / size)}
        for s in STALENESS[1:]:
            rollouts = self.by_version.get(version - s)
            if rollouts:
                point[f"kl_s{s}"], point[f"clip_s{s}"] = self._divergence(trainer, rollouts)
        self.points.append(point)
        return [(f"probe/{k}", float(v), version) for k, v in point.items() if k not in ("step", "compute")]

    def _divergence(self, trainer, rollouts: list) -> tuple[float, float]:
        current = trainer.completion_logprobs(rollouts)
        log_ratio = torch.tensor([c - b for r, row in zip(rollouts, current)
                                  for c, b in zip(row, r.behaviour_logprobs)], dtype=torch.float64)
        ratio = log_ratio.exp()
        kl = float((ratio - 1 - log_ratio).mean())
        clipped = float(((ratio < 1 - self.eps_low) | (ratio > 1 + self.eps_high)).double().mean())
        return kl, clipped

    def summary(self, budget: float) -> dict:
        """The medians over the measurements in the second half of the budget, and how many there were."""
        late = [p for p in self.points if p["compute"] >= budget / 2]
        keys = ["relative_update"] + [f"{m}_s{s}" for s in STALENESS for m in ("kl", "clip")]
        out = {"measurements": len(late), "every": PROBE_EVERY}
        for key in keys:
            values = [p[key] for p in late if key in p]
            out[key] = statistics.median(values) if values else None
        return out

    def state_dict(self) -> dict:
        return {"by_version": self.by_version, "points": self.points, "one_step_measured": self.one_step_measured}

    def load_state_dict(self, state: dict) -> None:
        self.by_version, self.points = state["by_version"], state["points"]
        self.one_step_measured = state["one_step_measured"]


def _matrices(model) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.dim() >= 2]
