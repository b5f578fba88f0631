"""The leaderboard page (leaderboard/index.html): rendered from a small synthetic MLflow store, checked as
HTML, then loaded in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium)
from file:// and from `replaybench leaderboard serve`. A screenshot is saved under $REPLAYBENCH_ARTIFACTS
(default: the test's temp folder)."""

import contextlib
import html
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from helpers import WORKLOAD, make_run

import benchmark.leaderboard.build
import benchmark.leaderboard.files
from benchmark.cli import main
from benchmark.cli.leaderboard import warn_unmatched
from benchmark.leaderboard.build import build, results_json
from benchmark.leaderboard.page import render_html
from benchmark.leaderboard.plots import PLOTTED_ENTRIES, _figure, _steps_axis, pareto_front
from benchmark.leaderboard.render import print_leaderboard, table_rows

pytestmark = pytest.mark.usefixtures("workloads_as_v2")  # made-up runs of arith-tiny version 2

INSTALL = "apt-get install -y chromium chromium-driver, and pip install selenium (the dev extra)"
PLOTS = ("curves", "pareto", "replay")


@contextlib.contextmanager
def synthetic_store(runs: Path):
    """An MLflow store of our own under `runs` for the duration of the block."""
    import benchmark.runner
    import benchmark.tracking

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(benchmark.tracking, "RUNS_DIR", runs)
        mp.setattr(benchmark.runner, "RUNS_DIR", runs)
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{runs / 'mlflow.db'}")
        mp.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        mp.setenv("COLUMNS", "300")
        yield


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A built leaderboard folder from a store with three ranked entries, a failed and a non-compliant run."""
    import benchmark.tracking

    root = tmp_path_factory.mktemp("page")
    runs = root / "runs"
    runs.mkdir()
    with synthetic_store(runs):
        c = benchmark.tracking.client()
        exp = benchmark.tracking.experiment_id(c, WORKLOAD)
        ids = {}
        for seed in range(4):  # accuracy per evaluation (every 120k of 4.8M); seeds differ so the bands show
            ramp = [0.2 + 0.03 * i + 0.01 * seed for i in range(12)]
            ids["on_policy", seed] = make_run(c, exp, "on_policy", seed, ramp, 6, 2, entropy=0.3,
                                              replay_ratio=1.0, offpolicy_mean=1.0 + 0.05 * seed)
            make_run(c, exp, "on_policy", 10 + seed, ramp, 6, 2)  # a held-out seed: sets the target
            faster = [a + 0.03 * i for i, a in enumerate(ramp[:10])]
            ids["fifo_uniform", seed] = make_run(c, exp, "fifo_uniform", seed, faster, entropy=0.25,
                                                 replay_ratio=3.1 + 0.02 * seed, offpolicy_mean=8.5 + 0.2 * seed)
        for seed in range(3):
            ids["slowpoke", seed] = make_run(c, exp, "slowpoke", seed, [0.2, 0.25, 0.3 + 0.02 * seed],
                                             replay_ratio=6.0, offpolicy_mean=20.0)
        ids["failed"] = make_run(c, exp, "crashy", 0, status="failed: StrategyError: sample() returned 3 rollouts")
        ids["override"] = make_run(c, exp, "fifo_uniform", 9, [0.9], overrides={"budget": 600_000})
        targets, out = root / "targets", root / "board"
        assert main(["leaderboard", "freeze-target", "--workload", WORKLOAD, "--targets", str(targets)]) == 0
        results = build(out, targets_dir=targets)
    return {"out": out, "results": results, "ids": ids, "targets": targets, "runs": runs}


def test_results_carry_what_the_page_plots(board):
    results = board["results"]
    assert results["schema"] == "replaybench-leaderboard/3"
    assert (board["out"] / "results.json").read_text() == results_json(results)
    assert [e["strategy"] for e in results["entries"]] == ["fifo_uniform", "on_policy", "slowpoke"]
    for e in results["entries"]:
        d = e["workloads"][WORKLOAD]
        band = d["accuracy_curve"]
        assert len(band["compute"]) == len(band["median"]) == len(band["q1"]) == len(band["q3"]) == 41
        assert all(lo <= m <= hi for lo, m, hi in zip(band["q1"], band["median"], band["q3"]))
        for run_id, r in d["per_run"].items():  # every plotted number sits next to its MLflow run id
            assert run_id in board["ids"].values()
            assert len(r["curve"]["compute"]) == 41 and r["replay_ratio"] > 0 and r["offpolicy_mean"] > 0
    fifo = results["entries"][0]["workloads"][WORKLOAD]
    assert fifo["replay_ratio"]["median"] == pytest.approx(3.13)
    assert fifo["offpolicy_mean"]["q1"] == pytest.approx(8.65)


def test_page_is_self_contained_and_agrees_with_the_table(board):
    page = (board["out"] / "index.html").read_text()
    results = board["results"]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched from anywhere
    assert page.count("<svg") == len(PLOTS) and "<script src" not in page
    header, rows = table_rows(results)
    for row in rows:
        for cell in row:
            assert f">{html.escape(cell, quote=True)}</td>" in page
    for run_id in board["ids"].values():  # every run, scored or excluded, is on the page by id
        assert run_id in page
    assert "failed: StrategyError: sample() returned 3 rollouts" in page and "non-compliant" in page
    assert "Those runs are on held-out seeds, never scored" in " ".join(page.split())  # why the target's runs differ
    # rendering is deterministic: the same results give the same bytes, plots included
    assert render_html(results) == page
    assert "<dc:date>" not in page


def test_pareto_front():
    assert pareto_front([(1, 0.5), (2, 0.7), (1.5, 0.4), (3, 0.6), (0.5, 0.3)]) == [4, 0, 1]


def test_a_staleness_axis_goes_logarithmic_only_when_one_entry_is_hundreds_of_steps_stale():
    """A control a thousand steps stale beside entries of a few: linear up to 10 steps, so those stay apart."""
    _, ax = _figure(4, 3)
    assert not _steps_axis(ax, 12) and ax.get_xscale() == "linear"
    ax.plot([0, 1079], [0, 1])
    assert _steps_axis(ax, 1079) and ax.get_xscale() == "symlog"
    assert list(ax.get_xticks()) == [0, 2, 5, 10, 100, 1000]  # none past the data, which would widen the axis

    def scaled(x):
        return ax.transScale.transform([(x, 0)])[0][0]

    assert scaled(5) - scaled(0) == pytest.approx((scaled(10) - scaled(0)) / 2)  # linear up to 10 steps
    assert scaled(100) - scaled(10) == pytest.approx(scaled(1000) - scaled(100))  # logarithmic beyond
    assert ax.get_xlim()[1] < 2000


def test_build_writes_the_page_atomically(board, tmp_path, monkeypatch):
    out = tmp_path / "board"
    shutil.copytree(board["out"], out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(results, highlight=None):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(benchmark.leaderboard.build, "render_html", boom)
    with synthetic_store(board["runs"]), pytest.raises(RuntimeError, match="plotting failed"):
        build(out, targets_dir=board["targets"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing rewritten, no temp files


def test_serve_reports_a_missing_page(tmp_path, capsys):
    assert main(["leaderboard", "serve", "--dir", str(tmp_path), "--port", "0"]) == 2
    assert "replaybench leaderboard build" in " ".join(capsys.readouterr().err.split())


# ---- in a real browser --------------------------------------------------------------------------
def artefact_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("REPLAYBENCH_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    # CI sets REPLAYBENCH_REQUIRE_BROWSER=1 so that a failed install fails the run instead of skipping the page.
    missing = pytest.fail if os.environ.get("REPLAYBENCH_REQUIRE_BROWSER") == "1" else pytest.skip
    if not (chromium and driver):
        missing(f"headless Chromium is not installed: {INSTALL}")
    try:
        from selenium import webdriver
    except ImportError:
        missing(f"selenium is not installed: {INSTALL}")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,900",
                "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(driver), options=options)
    yield b
    b.quit()


def ranking_labels(browser) -> list[str]:
    from selenium.webdriver.common.by import By

    return [row.find_elements(By.TAG_NAME, "td")[2].text for row in browser.find_elements(By.CSS_SELECTOR,
                                                                                             "#ranking tbody tr")]


def check_page(browser, url: str, results: dict, screenshot: Path | None = None) -> None:
    from selenium.webdriver.common.by import By

    browser.get(url)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    _, rows = table_rows(results)
    labels = [row[2] for row in rows]
    assert ranking_labels(browser) == labels  # one row per entry, in rank order
    assert len(labels) == len(results["entries"])
    for w in results["workloads"]:
        for kind in PLOTS:
            svg = browser.find_element(By.CSS_SELECTOR, f'[id="{kind}-{w}"] svg')  # an id may hold a dot
            assert svg.size["width"] > 300 and svg.size["height"] > 100, (kind, svg.size)
            assert svg.find_elements(By.CSS_SELECTOR, "path")

    def click(header: str) -> None:
        browser.find_element(By.XPATH, f'//table[@id="ranking"]//th[normalize-space()="{header}"]').click()

    click("entry")  # text: alphabetical, then reversed
    assert ranking_labels(browser) == sorted(labels)
    click("entry")
    assert ranking_labels(browser) == sorted(labels, reverse=True)
    click("speedup (geo-mean) [95% CI]")  # the ranking's order reversed: "not reached" below every speedup
    by_score = sorted(results["entries"], key=lambda e: (e["score"]["reached"], e["score"]["speedup_geomean"]
                                                         if e["score"]["reached"] else e["score"]["best_vs_target"]))
    assert ranking_labels(browser) == [e["label"] + (" (reference)" if e["reference"] else "") for e in by_score]
    click("rank [95%]")
    assert ranking_labels(browser) == labels
    assert not [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    if screenshot:
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1400, height + 100)
        assert browser.save_screenshot(str(screenshot))
        print(f"screenshot of the leaderboard page: {screenshot}")


def test_page_in_chromium_from_file(board, browser, tmp_path):
    shot = artefact_dir(tmp_path) / "leaderboard_page.png"
    check_page(browser, (board["out"] / "index.html").as_uri(), board["results"], screenshot=shot)
    assert shot.stat().st_size > 10_000


@pytest.fixture(scope="module")
def served(board):
    """`replaybench leaderboard serve --port 0` on the built folder; yields (url, process)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmark.cli", "leaderboard", "serve", "--port", "0",
                             "--dir", str(board["out"])], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, f"no URL in the first line of output: {line!r}"
        yield found.group(0), proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_page_in_chromium_from_serve(board, browser, served):
    check_page(browser, served[0], board["results"])


MULTI = ("arith-tiny", "qwen3-0.6b-openr1", "qwen3-8b-minif2f")  # real workloads: freeze-target loads them


@pytest.fixture(scope="module")
def multi_board(tmp_path_factory):
    """A board over three workloads, each with its frozen target: six ranked entries (two of them tied on every
    workload, one with 2 seeds), one entry with runs on one workload only (not ranked), a failed run."""
    import benchmark.tracking

    root = tmp_path_factory.mktemp("multi")
    runs = root / "runs"
    runs.mkdir()
    with synthetic_store(runs):
        c = benchmark.tracking.client()
        slopes = {"fast_a": 0.06, "fast_b": 0.06, "medium": 0.045, "two_seeds": 0.04, "slow": 0.035}
        for i, w in enumerate(MULTI):  # 21 evaluations on each workload, so the same ramps fit all three
            exp = benchmark.tracking.experiment_id(c, w)
            for seed in [*range(4), *range(10, 14)]:  # the scored seeds and the held-out ones
                make_run(c, exp, "on_policy", seed, [0.2 + 0.03 * k + 0.01 * (seed % 10) for k in range(12)], 6, 2,
                         replay_ratio=1.0, offpolicy_mean=1.0, workload=w)
            for j, (name, slope) in enumerate(slopes.items()):
                for seed in range(2 if name == "two_seeds" else 4):
                    make_run(c, exp, name, seed, [0.2 + (slope + 0.005 * i) * k + 0.01 * seed for k in range(12)],
                             replay_ratio=1.5 + j, offpolicy_mean=2.0 + j + 0.1 * seed, workload=w)
            make_run(c, exp, "crashy", 0, status="failed: StrategyError: sample() returned 3 rollouts", workload=w)
        exp = benchmark.tracking.experiment_id(c, MULTI[0])
        for seed in range(4):
            make_run(c, exp, "one_workload", seed, [0.2 + 0.05 * k for k in range(12)], workload=MULTI[0])
        targets, out = root / "targets", root / "board"
        for w in MULTI:
            assert main(["leaderboard", "freeze-target", "--workload", w, "--targets", str(targets)]) == 0
        results = build(out, targets_dir=targets)
    return {"out": out, "results": results}


def test_multi_workload_page_in_chromium(multi_board, browser, tmp_path):
    from selenium.webdriver.common.by import By

    results = multi_board["results"]
    assert sorted(results["workloads"]) == list(MULTI) and len(results["entries"]) == 6
    assert any("one_workload" in n["key"] for n in results["not_ranked"])
    page = (multi_board["out"] / "index.html").read_text()
    assert page.count("<svg") == len(PLOTS) * len(MULTI)  # one set of plots per workload
    assert render_html(results) == page
    shot = artefact_dir(tmp_path) / "leaderboard_page_multi.png"
    check_page(browser, (multi_board["out"] / "index.html").as_uri(), results, screenshot=shot)
    for w in MULTI:  # each workload's section is linked from the top and holds its own three plots
        section = browser.find_element(By.ID, f"workload-{w}")
        assert browser.find_element(By.CSS_SELECTOR, f'a[href="#workload-{w}"]')
        assert section.location["y"] < browser.find_element(By.ID, f"curves-{w}").location["y"]
    # a per-workload speedup column sorts numerically, highest first on the second click
    header = f"speedup {MULTI[1]}"
    th = browser.find_element(By.XPATH, f'//table[@id="ranking"]//th[normalize-space()="{header}"]')
    th.click()
    th.click()
    col = table_rows(results)[0].index(header)
    shown = [float(r.find_elements(By.TAG_NAME, "td")[col].text)
             for r in browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")]
    assert shown == sorted(shown, reverse=True) and len(shown) == 6
    assert th.get_attribute("aria-sort") == "descending"
    assert not [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def test_serve_serves_the_folder_and_stops_on_ctrl_c(board, served):
    url, proc = served
    with urllib.request.urlopen(url + "results.json", timeout=10) as response:
        assert response.read() == (board["out"] / "results.json").read_bytes()
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == (board["out"] / "index.html").read_bytes()
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(timeout=10) == 0
    assert "stopped" in proc.stdout.read()


def test_page_at_phone_width_keeps_the_ranking_and_plot_text_readable(board, browser, tmp_path):
    """At 420 px the rank, the entry and its score are in view, and the plots' text is no smaller than ~7 px
    (a plot scrolls sideways instead of shrinking); screenshots at 1400 and 420 px are kept."""
    from selenium.webdriver.common.by import By

    folder = artefact_dir(tmp_path)
    browser.get((board["out"] / "index.html").as_uri())
    try:
        for width in (1400, 420):
            browser.set_window_size(width, 900)
            viewport = browser.execute_script("return document.documentElement.clientWidth")
            for header in ("rank [95%]", "entry", "speedup (geo-mean) [95% CI]"):
                th = browser.find_element(By.XPATH, f'//table[@id="ranking"]//th[normalize-space()="{header}"]')
                right = browser.execute_script("return arguments[0].getBoundingClientRect().right", th)
                assert th.is_displayed() and right <= viewport, (width, header, right, viewport)
            smallest = browser.execute_script(
                "return Math.min(...Array.from(document.querySelectorAll('figure svg text'))"
                ".map(t => t.getBoundingClientRect().height).filter(h => h > 0))")
            assert smallest >= 7, (width, smallest)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            browser.set_window_size(width, min(height + 100, 6000))
            assert browser.save_screenshot(str(folder / f"leaderboard_page_{width}px.png"))
    finally:
        browser.set_window_size(1400, 900)


# ---- your entry, highlighted ----------------------------------------------------------------------
LONG = 12  # entries besides the reference: more than the plots show
YOURS_NAME = f"entry_{LONG - 1:02d}"  # the slowest of them, ranked below the plotted ones


@pytest.fixture(scope="module")
def long_board(tmp_path_factory):
    """A board of 13 ranked entries (12 and the reference); entry_NN first reaches the target at evaluation
    NN + 1, so each has a rank of its own. Built with --highlight on the last of them."""
    import benchmark.tracking

    root = tmp_path_factory.mktemp("long")
    runs = root / "runs"
    runs.mkdir()
    with synthetic_store(runs):
        c = benchmark.tracking.client()
        exp = benchmark.tracking.experiment_id(c, WORKLOAD)
        for seed in [*range(4), *range(10, 14)]:  # the scored seeds and the held-out ones that set the target
            make_run(c, exp, "on_policy", seed, [0.2 + 0.03 * k for k in range(12)], 6, 2)
        for j in range(LONG):
            for seed in range(4):
                make_run(c, exp, f"entry_{j:02d}", seed, [0.2] * (j + 1) + [0.6 + 0.01 * seed],
                         replay_ratio=1.5 + 0.1 * j, offpolicy_mean=2.0 + 0.1 * j)
        targets, out = root / "targets", root / "board"
        assert main(["leaderboard", "freeze-target", "--workload", WORKLOAD, "--targets", str(targets)]) == 0
        assert main(["leaderboard", "build", "--out", str(out), "--targets", str(targets),
                     "--highlight", YOURS_NAME]) == 0
    results = benchmark.leaderboard.files.read_results(out / "results.json")
    yours = next(e for e in results["entries"] if e["name"] == YOURS_NAME)
    return {"out": out, "results": results, "yours": yours}


def test_a_highlighted_entry_below_the_plotted_ones_is_marked_and_plotted(long_board):
    results, yours = long_board["results"], long_board["yours"]
    position = results["entries"].index(yours)
    assert len(results["entries"]) == LONG + 1 and position >= PLOTTED_ENTRIES and yours["rank"] > PLOTTED_ENTRIES
    page = (long_board["out"] / "index.html").read_text()
    assert page == render_html(results, highlight=YOURS_NAME)  # results.json holds no highlight: the renderer's
    assert re.findall(r'<tr class="[^"]*\bhighlighted\b[^"]*" data-rank="(\d+)">', page) == [str(position)]
    assert f">{yours['label']} (yours)</td>" in page
    for plot in ("curves", "pareto"):  # its curve and its point, whatever its rank
        assert f'<g id="yours-{plot}-{WORKLOAD}-{yours["key"]}"' in page
    assert f"{yours['label']} ({yours['workers']},{yours['trainers']}) (yours)" in page  # the curves' legend
    assert (f"The plots show the first {PLOTTED_ENTRIES} entries by rank and {yours['label']} (yours) "
            f"(rank {yours['rank']}, thicker line).") in " ".join(page.split())
    # without a highlight, as on the published board: nothing marked, the first 10 plotted, no highlight style
    plain = render_html(results)
    assert "highlighted" not in plain and "(yours)" not in plain and 'id="yours-' not in plain
    assert "by rank.</p>" in plain


def test_the_terminal_table_marks_the_highlighted_entry(long_board):
    from rich.console import Console

    out = io.StringIO()
    print_leaderboard(long_board["results"], Console(file=out, width=300), highlight=YOURS_NAME)
    marked = [line for line in out.getvalue().splitlines() if "(yours)" in line]
    assert len(marked) == 1 and YOURS_NAME in marked[0]
    err = io.StringIO()  # a name no entry has (a typo): said, not an error
    warn_unmatched(Console(file=err, width=300), long_board["results"], "entry_99")
    assert "no ranked entry is named entry_99; nothing is highlighted" in err.getvalue()


def test_the_published_board_highlights_nothing(capsys):
    assert main(["leaderboard", "build", "--publish", "--highlight", "anything"]) == 2  # refused before scoring
    assert "highlights no entry" in " ".join(capsys.readouterr().err.split())
    assert main(["leaderboard", "build", "--publish", "--rules", "3"]) == 2  # a preview under other rules
    assert "drop --rules" in " ".join(capsys.readouterr().err.split())


def test_highlighted_entry_in_chromium(long_board, browser, tmp_path):
    """The acceptance test: your entry, ranked below the plotted ones, has its row marked and its curve drawn."""
    from selenium.webdriver.common.by import By

    yours = long_board["yours"]
    browser.get((long_board["out"] / "index.html").as_uri())
    assert not [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    (row,) = browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr.highlighted")
    assert row.find_elements(By.TAG_NAME, "td")[2].text == f"{yours['label']} (yours)"
    assert int(row.get_attribute("data-rank")) >= PLOTTED_ENTRIES
    first = row.find_elements(By.TAG_NAME, "td")[0]
    assert first.value_of_css_property("border-left-width") == "4px"
    assert row.find_elements(By.TAG_NAME, "td")[2].value_of_css_property("font-weight") == "600"
    curve = browser.find_element(By.CSS_SELECTOR, f'[id="curves-{WORKLOAD}"] svg [id="yours-curves-{WORKLOAD}-'
                                                  f'{yours["key"]}"] path')
    assert curve.is_displayed() and curve.size["width"] > 100  # a line across the plot, not a dot
    legend = [t.text for t in browser.find_elements(By.CSS_SELECTOR, f'[id="curves-{WORKLOAD}"] svg text')]
    assert any("(yours)" in text for text in legend)
    shot = artefact_dir(tmp_path) / "leaderboard_page_highlight.png"
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(height + 100, 6000))
    try:
        assert browser.save_screenshot(str(shot))
    finally:
        browser.set_window_size(1400, 900)


def test_the_published_rankings_every_column_fits_at_1400_and_2100_px(browser):
    """The published board's 22 entries and 13 columns in view without scrolling sideways (the long cells wrap)."""
    from benchmark.paths import LEADERBOARD_DIR

    browser.get((LEADERBOARD_DIR / "index.html").as_uri())
    try:
        for width in (1400, 2100):
            browser.set_window_size(width, 900)
            shown, needed = browser.execute_script(
                "const t = document.getElementById('ranking'); return [t.parentElement.clientWidth, t.scrollWidth]")
            assert needed <= shown, (width, needed, shown)
    finally:
        browser.set_window_size(1400, 900)


def test_a_board_without_the_reference_keeps_its_score_in_view_at_phone_width(no_reference_board, browser):
    """Without band, rank and profile the columns shift: the phone's style picks them by class, not position."""
    from selenium.webdriver.common.by import By

    browser.get((no_reference_board / "index.html").as_uri())
    try:
        browser.set_window_size(420, 900)
        shown = [th.text.replace("\n", " ") for th in browser.find_elements(By.CSS_SELECTOR, "#ranking th")
                 if th.is_displayed()]
        assert "entry" in shown and "speedup (geo-mean) [95% CI]" in shown and "(W,T)" not in shown
        assert "seeds" not in shown
    finally:
        browser.set_window_size(1400, 900)


@pytest.fixture
def no_reference_board(isolated_runs, tmp_path, monkeypatch):
    """A local board of one entry in a store without the reference's runs (a fresh clone's after `submit`)."""
    from benchmark.tracking import client, experiment_id

    c = client()
    exp = experiment_id(c, WORKLOAD)
    for seed in range(4):
        make_run(c, exp, "kestrel", seed, [0.3, 0.5, 0.8], workers=5, trainers=3)
    build(tmp_path / "board", WORKLOAD)
    return tmp_path / "board"
