"""report.html opened in headless Chromium (Debian's package): every figure decodes and has a size."""

import html
import json
import re
import shutil
import subprocess

import pytest

NUM_FIGURES = 6  # pareto, breakdown, topology (the plan on the box), memory, concurrency, history
TOPOLOGY = "the plan on the box"
BROKEN = "broken-control"  # an image that must fail to decode: proves the check can see a broken figure
PROBE = f"""<img alt="{BROKEN}" src="data:image/png;base64,iVBORw0KGgoAAAAA">
<script>
window.addEventListener("load", () => {{
  const images = [...document.images].map((i) => ({{alt: i.alt, width: i.naturalWidth, height: i.naturalHeight}}));
  const svgs = [...document.querySelectorAll("svg")].map((s) => s.getBoundingClientRect().width);
  const out = document.createElement("pre");
  out.id = "figure-check";
  out.textContent = JSON.stringify({{images, svgs}});
  document.body.appendChild(out);
}});
</script>
"""


@pytest.fixture(scope="session")
def chromium() -> str:
    """Checked before the search fixture runs: a missing browser fails at once."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    pytest.fail("chromium is not installed: `make test` installs Debian's chromium (.ci/test_deps.sh)")


def _render(chromium: str, page, profile) -> dict:
    argv = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="figure-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium exit {done.returncode}; no result in the DOM: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_every_figure_of_report_html_loads_in_chromium(chromium, searched, tmp_path):
    page = tmp_path / "report.html"
    text = (searched / "report.html").read_text()
    assert text.count("</body>") == 1
    page.write_text(text.replace("</body>", PROBE + "</body>"))
    result = _render(chromium, page, tmp_path / "profile")
    figures = [i for i in result["images"] if i["alt"] != BROKEN]
    control = [i for i in result["images"] if i["alt"] == BROKEN]
    assert len(figures) + len(result["svgs"]) >= NUM_FIGURES
    assert all(i["width"] >= 400 and i["height"] >= 200 for i in figures), figures
    assert [i["alt"] for i in figures].count(TOPOLOGY) == 1, figures  # the topology figure decodes, once
    assert all(width > 0 for width in result["svgs"])
    assert control == [{"alt": BROKEN, "width": 0, "height": 0}]
