"""README.md is a front page (STYLE.md section 18): short, the two commands as CI runs them, and every
link in it and in CONTRIBUTING.md and harness/README.md leads to a file (and heading) of the checkout."""

import re
from pathlib import Path

from tests.conftest import REPO

PAGES = ("README.md", "CONTRIBUTING.md", "harness/README.md")
COMMANDS = ('python3 -m pip install "tox>=4.11" "tox-uv>=1.11" && python3 -m tox -e demo',
            'python3 -m pip install "tox>=4.11" "tox-uv>=1.11" && python3 -m tox -e test')
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # a '#' in a code block is no heading
    return {anchor(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """Every relative link of a Markdown page whose file, or heading in it, is not in the checkout."""
    bad = []
    for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...: not a file of ours
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(root.resolve()) or not resolved.exists():
            bad.append(f"{page.name}: {target} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            bad.append(f"{page.name}: {target} (no such heading)")
    return bad


def test_readme_is_a_front_page_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    assert all(command in text.splitlines() for command in COMMANDS)
    assert "## Architecture" not in text  # the contributor guide is CONTRIBUTING.md


def test_every_link_leads_to_a_file_of_the_checkout():
    assert [bad for page in PAGES for bad in broken_links(REPO / page)] == []


def test_a_broken_link_is_caught(tmp_path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# A page\n\n## The test suite's times\n")
    (tmp_path / "outside.md").write_text("")
    page = root / "README.md"
    page.write_text("[ok](docs/a.md#the-test-suites-times) [gone](docs/b.md) [heading](docs/a.md#nothing)\n"
                    "[web](https://example.org) [up](../outside.md)\n```\n[in code](nowhere.md)\n```\n")
    assert broken_links(page, root) == ["README.md: docs/b.md (no such file)",
                                        "README.md: docs/a.md#nothing (no such heading)",
                                        "README.md: ../outside.md (no such file)"]
