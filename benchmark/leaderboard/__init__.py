"""The leaderboard: reads MLflow (the system of record), scores with the rules in scoring.py (version 2) or
scoring_v3.py (version 3: the rules a target was frozen with, or `build --rules 3`), prints a ranked
table and writes results.json, LEADERBOARD.md and the page index.html: the local board (runs/leaderboard/) or
the published one (leaderboard/).
Rules: leaderboard/README.md.

    replaybench leaderboard [--workload W] [--track T]      ranked table in the terminal
    replaybench leaderboard build [--publish]                 write results.json, LEADERBOARD.md, index.html
                                                              (runs/leaderboard/; --publish: leaderboard/)
    replaybench leaderboard build --highlight NAME            the local page with your entry marked and plotted
    replaybench leaderboard build --rules 3 --out DIR         the store scored under rules v3 (a preview)
    replaybench leaderboard serve [--dir D] [--port N]        serve leaderboard/ (or D) on 127.0.0.1
    replaybench leaderboard freeze-target --workload W        freeze W's target from the reference runs
    replaybench leaderboard import-runs [FOLDER]              load leaderboard/runs/ into your MLflow store

The modules, each importing only modules listed above it (this file holds LeaderboardError alone, so that
importing the package loads neither MLflow nor matplotlib):

    scoring     the scoring rules, version 2: pure functions over evaluation curves, no MLflow
    comparisons two samples of compute-to-target compared (rules v3): the interval, the test, the correction
    scoring_v3  the scoring rules, version 3: what changes from version 2
    store       reading MLflow: RunRecord, load_runs, summary.json, reading_store (fail fast, clear errors)
    files       writing the published files: atomically, and in JSON, which has no infinity
    compliance  which runs count: canonical workload settings, exclusion reasons, one run per seed
    targets     the frozen targets, leaderboard/targets/<workload>.json: load, freeze
    published   the runs behind the published board, shipped in leaderboard/runs/ (strategy files by SHA-256),
                and loading them into a store
    render      the terminal table and LEADERBOARD.md, and the cell formats the page shares
    findings    docs/findings.md's measured side (and a v3 preview's FINDINGS.md), worded by rule
    plots       the page's SVG plots (matplotlib, imported when a plot is drawn)
    page        index.html
    build       the results dict (every number with its MLflow run ids), and writing the three files
    serve       serving the folder on 127.0.0.1

The `replaybench leaderboard` command itself is benchmark/cli/leaderboard.py.
"""


from benchmark.errors import UserError


class LeaderboardError(UserError):
    """Scoring cannot proceed; the message names the fix."""
