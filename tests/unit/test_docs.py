"""The project's documents hold together: every citation of docs/design.md names a section
that exists, every link of the README and of docs/ reaches a file (and heading) of the
repository, and nothing cites a document the repository does not contain."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
# Where code, comments and module documentation live.
CODE_DIRS = ("plugins", "roles", "playbooks", "hack", "tests", "bench", "examples", "extensions", "meta")
TEXT_SUFFIXES = {".py", ".yml", ".yaml", ".md", ".sh", ".j2", ".txt", ".cfg", ".toml", ".in", ""}
# Markdown pages whose links must resolve.
PAGES = ("README.md", "docs/*.md", "roles/node_maintenance/README.md")

SECTION_HEADING = re.compile(r"^#{2,6} §(\d+(?:\.\d+)*) \S", re.MULTILINE)
SECTION = r"§\d+(?:\.\d+)*"
# "docs/design.md §4.7", "docs/design.md §4.1 to §4.6", "docs/design.md §12.1 and §12.3", "(docs/design.md §4.2, §4.3)"
CITATION = re.compile(rf"docs/design\.md\s+({SECTION}(?:(?:\s*,\s*|\s+(?:and|to|or)\s+){SECTION})*)")
# The bare "§N" references inside design.md itself
INNER = re.compile(SECTION)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A file named in code quotes with its folder: `hack/topology.py`, `guards/renewal.py` (under
# plugins/module_utils/), `plugin_utils/capabilities.py` (under plugins/).
NAMED_FILE = re.compile(r"`([\w.-]+(?:/[\w.-]+)+\.(?:py|yml|yaml|sh|md|json|env|toml))`")
NAMED_FROM = ("", "plugins", "plugins/module_utils")
# (not what a tool put in a hidden folder of the checkout: bench/.venv holds thousands of files)
OUR_FILE_NAMES = {path.name for top in ("plugins", "roles", "playbooks", "hack", "tests", "bench")
                  for path in (ROOT / top).rglob("*.*")
                  if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)}
# A document outside the repository: a design.md not under docs/ (shared/design.md, "design.md,
# chapter ..."), the source material the project was specified from ("the seed", "chapter 4").
OUTSIDE = (
    re.compile(r"(?<!docs/)\bdesign\.md"),
    re.compile(r"\bthe seed'?s?\b", re.IGNORECASE),
    re.compile(r"\bchapters? \d", re.IGNORECASE),
    re.compile(r"\bshared/"),
)


def code_files() -> Iterator[Path]:
    for top in CODE_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if (path.is_file() and path.suffix in TEXT_SUFFIXES and path != Path(__file__).resolve()
                    and not any(part.startswith(".") or part in ("results", "__pycache__") for part in
                                path.relative_to(ROOT).parts)):
                yield path


def read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ""


def sections() -> Set[str]:
    return set(SECTION_HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def citations() -> List[Tuple[str, int, str]]:
    """(file, line, section) for every section that a file of the repository cites."""
    found = []
    for path in list(code_files()) + [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")):
        text = read(path)
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for number in INNER.findall(match.group(1)):
                found.append((str(path.relative_to(ROOT)), line, number[1:]))
    return found


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rule) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> Set[str]:
    seen: Dict[str, int] = {}
    result = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or not re.match(r"#{1,6} ", line):
            continue
        base = slug(line.lstrip("#"))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def page_links() -> List[Tuple[str, str]]:
    links = []
    for pattern in PAGES:
        for page in sorted(ROOT.glob(pattern)):
            text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
            links += [(str(page.relative_to(ROOT)), target) for target in LINK.findall(text)]
    return links


def test_design_numbers_its_sections_once_each():
    numbers = SECTION_HEADING.findall(DESIGN.read_text(encoding="utf-8"))
    assert len(numbers) > 40
    assert len(numbers) == len(set(numbers)), sorted(n for n in numbers if numbers.count(n) > 1)
    # every subsection sits under its parent: §4.7.2 under §4.7 under §4
    parents = {n.rsplit(".", 1)[0] for n in numbers if "." in n}
    assert parents <= set(numbers), parents - set(numbers)


def test_the_code_cites_sections_of_design_that_exist():
    cited = citations()
    assert len(cited) >= 30, "the citations were not found: has the citation form changed?"
    known = sections()
    missing = [f"{file}:{line}: docs/design.md §{number}" for file, line, number in cited if number not in known]
    assert not missing, "cited, but not a section of docs/design.md:\n" + "\n".join(missing)


def test_design_refers_only_to_its_own_sections():
    text = DESIGN.read_text(encoding="utf-8")
    body = SECTION_HEADING.sub("", text)
    missing = sorted({ref for ref in INNER.findall(body) if ref[1:] not in sections()})
    assert not missing, missing


@pytest.mark.parametrize("page, target", page_links(), ids=lambda value: value)
def test_links_of_the_readme_and_docs_reach_the_repository(page, target):
    if re.match(r"[a-z]+:", target):  # https:, mailto: are outside; not checked here
        return
    path_part, anchor = target.split("#", 1) if "#" in target else (target, "")
    where = (ROOT / page).parent / path_part if path_part else ROOT / page
    assert where.exists(), f"{page}: link to {target}: no {where.relative_to(ROOT) if ROOT in where.parents else where}"
    if anchor and where.suffix == ".md":
        assert anchor in anchors(where), f"{page}: link to {target}: {path_part or page} has no heading #{anchor}"


def test_the_files_the_pages_name_exist():
    """A page that names a file by its path names one that is there (after a move, the page
    says where it went)."""
    missing = []
    for pattern in PAGES:
        for page in sorted(ROOT.glob(pattern)):
            for name in NAMED_FILE.findall(page.read_text(encoding="utf-8")):
                bases = [page.parent] + [ROOT / base for base in NAMED_FROM]
                ours = [base for base in bases if (base / name.split("/")[0]).is_dir()]
                # ours: it starts with a folder of the repository, or a file of that name is
                # in it (a folder moved away); else a user's file (an AWX project's)
                named_ours = ours or name.rsplit("/", 1)[-1] in OUR_FILE_NAMES
                if named_ours and not any((base / name).exists() for base in bases):
                    missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert not missing, "named, but no such file:\n" + "\n".join(sorted(set(missing)))


def test_the_readme_links_to_every_page_of_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name}" not in readme]
    assert not unlinked, unlinked


def test_nothing_cites_a_document_outside_the_repository():
    found = []
    for path in list(code_files()) + [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")):
        # a page of docs/ names design.md as its neighbour
        patterns = OUTSIDE[1:] if path.parent == ROOT / "docs" else OUTSIDE
        for number, line in enumerate(read(path).splitlines(), 1):
            for pattern in patterns:
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "cites a document the repository does not contain:\n" + "\n".join(found)
