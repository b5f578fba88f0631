"""Where the repository's folders are: the one place that knows the layout of the checkout."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"
WORKLOADS_DIR = REPO_ROOT / "workloads"
BASELINES_DIR = REPO_ROOT / "baselines"
SUBMISSIONS_DIR = REPO_ROOT / "submissions"
LEADERBOARD_DIR = REPO_ROOT / "leaderboard"
