"""The documentation: README as a front page, docs/ as a MkDocs site that builds in strict mode.

The site is built for real (``mkdocs build --strict`` with the project's ``mkdocs.yml``), so a
broken link, an unknown anchor or a page missing from the nav fails the suite. ``-q`` is never
passed: mkdocs 1.6 then hides the warnings from strict mode too and exits 0 on a broken link.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# one worker runs the module: the site is built once, not per worker
pytestmark = pytest.mark.xdist_group("test_docs_site")

ROOT = Path(__file__).resolve().parents[1]


def _build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(project / "mkdocs.yml"),
         "-d", str(site)],
        capture_output=True, text=True, env=env, timeout=300,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    done = _build(ROOT, site)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_the_site_builds_strictly_with_every_page(built: Path) -> None:
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    assert len(pages) >= 10
    for page in pages:
        html = built / ("index.html" if page == "index" else f"{page}/index.html")
        assert html.is_file(), f"docs/{page}.md was not built"


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    """The strictness above is real: the same build fails on a bad link, naming the page."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "cli.md").open("a", encoding="utf-8") as f:
        f.write("\nSee [a page that is gone](gone.md) and [a lost anchor](pytest.md#no-such).\n")
    done = _build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "gone.md" in done.stderr and "no-such" in done.stderr


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    done = _build(tmp_path, tmp_path / "site")
    assert done.returncode != 0 and "orphan.md" in done.stderr


def _slugs(markdown: str) -> set[str]:
    """Heading anchors as GitHub and Python-Markdown's toc make them (outside code fences)."""
    slugs, fence = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.+)", line)):
            slugs.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return slugs


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"(?<!!)\[[^\]]+\]\(([^)]+)\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) >= 10  # the docs map is there
    broken = []
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        if not target.exists():
            broken.append(link)
        elif anchor and anchor not in _slugs(target.read_text(encoding="utf-8")):
            broken.append(link)
    assert broken == []


def test_the_quick_start_commands_are_the_ones_ci_runs() -> None:
    """README's second quick-start command is scripts/test, and .ci/run runs exactly it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    script = ROOT / "scripts" / "test"
    assert "```bash\n./scripts/test\n```" in readme
    assert [line for line in ci.splitlines() if "scripts/test" in line and
            not line.startswith("#")] == ["./scripts/test"]
    assert os.access(script, os.X_OK)
    steps = script.read_text(encoding="utf-8")
    assert "pip install -q uv\nuv pip install -e '.[test]'\nexec pytest -n 3" in steps
    assert "pip install -e . && hermes-replay replay cassettes" in readme


def test_architecture_names_every_room_of_the_import_graph() -> None:
    graph_file = ROOT / "tests" / "test_import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", graph_file)
    assert spec is not None and spec.loader is not None
    graph = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graph)
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    missing = [room for rooms in graph.LAYERS for room in rooms if f"`{room}" not in text]
    assert missing == []
