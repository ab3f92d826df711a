"""The publishing workflow (.github/workflows/book.yml): valid for GitHub Actions by a workflow linter
(check-jsonschema with the GitHub workflow schema it ships, so nothing is downloaded at test time), and true to the
project: it builds with the README's command, publishes the folder the build writes, and deploys with the
permissions GitHub Pages needs."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "book.yml"


def _lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           str(path)], capture_output=True, text=True, timeout=120)


def _load(path: Path = WORKFLOW) -> dict:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # 'on' stays a string key, as GitHub reads it


def test_the_workflow_passes_the_linter():
    out = _lint(WORKFLOW)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("break_it", [
    lambda t: t.replace("runs-on: ubuntu-latest\n    timeout-minutes", "timeout-minutes"),  # a job with no machine
    lambda t: t.replace("steps:\n      - uses: actions/checkout@v4", "stepz:\n      - uses: actions/checkout@v4"),
    lambda t: t.replace("pages: write", "pages: publish"),  # not a permission level
], ids=["no runs-on", "misspelt steps", "bad permission"])
def test_the_linter_refuses_a_broken_copy(tmp_path, break_it):
    broken = tmp_path / "book.yml"
    text = break_it(WORKFLOW.read_text())
    assert text != WORKFLOW.read_text()
    broken.write_text(text)
    assert _lint(broken).returncode != 0


def _readme_commands() -> list[str]:
    block = re.search(r"## Set-up: two commands.*?```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_it_builds_with_the_readmes_command_and_publishes_what_the_build_writes():
    wf = _load()
    build = wf["jobs"]["build"]
    runs = [s["run"].strip() for s in build["steps"] if "run" in s]
    book = next(c for c in _readme_commands() if c.startswith("make book"))
    assert runs == [book]
    assert re.search(r"^book:.*\n\t\$\(BIN\)/python scripts/build_book\.py$", (REPO / "Makefile").read_text(), re.M)
    assert "root / '_build' / 'html' / 'index.html'" in (REPO / "scripts" / "build_book.py").read_text()
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_build/html"
    python = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    assert python["with"]["python-version"] == "3.11"  # the version constraints.txt pins for
    assert "Python 3.11" in (REPO / "constraints.txt").read_text().splitlines()[0]
    assert build.get("env", {}).get("ZS_PROFILE") == "quick"


def test_it_deploys_to_pages_from_main_with_the_permissions_pages_needs():
    wf = _load()
    assert wf["on"]["push"]["branches"] == ["main"] and "workflow_dispatch" in wf["on"]
    assert wf["permissions"] == {"contents": "read"}  # the build reads; only the deploy job may write Pages
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
