"""A drain option is declared once (module_utils/model/drain_spec.py) and named in few files.

For each drain option, the files of the collection's code that name it (as a whole word) are
counted, and more than MAX fails. What counts: everything under plugins/, roles/, playbooks/
and meta/ (what ships and runs), except documentation. Not counted:

- documentation: docs/, README*, changelogs/, CHANGELOG.rst and any *.md; the options are
  described there in prose on purpose;
- tests: tests/ and extensions/ (the molecule scenario), bench/ (the benchmark, whose peer
  playbooks use kubernetes.core.k8s_drain's options of the same names), hack/ (development
  tooling; the generator names no option) and examples/ (the demo).

Generated outputs count (the doc fragment, the role's argument_specs.yml and defaults/main.yml):
they ship, a reader meets the name there, and a change to an option shows in their diff; they
are kept true by tests/unit/test_specs.py, not by hand. So the budget is: the spec, its
generated outputs, the module that exposes the option (its documentation), and the rule that
uses it.

Options whose name is an ordinary word are not counted: the word names other things across
the code (``timeout`` of leases and waits, RBAC ``rules``, the KubeVirt API's ``kubevirt``,
surge-first's own model for ``surge``, ``force`` in messages), so a count says nothing about
the option. KNOWN_OVER holds, for each option still above the budget, the files where the
drain's rules and messages use it: the count may only go down (then lower or drop its entry).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import drain_spec

ROOT = Path(__file__).resolve().parents[2]
MAX = 6
CODE = ("plugins", "roles", "playbooks", "meta")
DOC_NAMES = ("README", "CHANGELOG")
COMMON_WORDS = {"force", "timeout", "rules", "kubevirt", "surge"}
# option -> its count today: above MAX because the drain's rules and messages use it in several
# files (the tracker, the result's lines, the stuck-pod and readiness messages...); lower it when
# a change takes it out of one, drop it at MAX or below
KNOWN_OVER = {
}


def is_doc(path: Path) -> bool:
    return path.suffix == ".md" or path.name.startswith(DOC_NAMES)


def code_files() -> List[Path]:
    return sorted(p for folder in CODE for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc" and not is_doc(p))


def naming(option: str, files: List[Path]) -> List[str]:
    word = re.compile(rf"\b{re.escape(option)}\b")
    return [str(p.relative_to(ROOT)) for p in files if word.search(p.read_text(errors="replace"))]


COUNTED = [name for name in drain_spec.DRAIN if name not in COMMON_WORDS]


@pytest.fixture(scope="module")
def counts() -> Dict[str, List[str]]:
    files = code_files()
    return {option: naming(option, files) for option in COUNTED}


@pytest.mark.parametrize("option", COUNTED)
def test_a_drain_option_is_named_in_few_files(option: str, counts: Dict[str, List[str]]) -> None:
    named = counts[option]
    allowed = KNOWN_OVER.get(option, MAX)
    assert len(named) <= allowed, (
        f"{option} is named in {len(named)} files (at most {allowed}): {named}. Declare it in "
        "plugins/module_utils/model/drain_spec.py only, and let the generated copies (hack/role_docs.py) and "
        "the options objects' fields take it from there")
    if option in KNOWN_OVER:
        assert len(named) == allowed or len(named) > MAX, \
            f"{option} is named in {len(named)} files now: lower or drop its KNOWN_OVER entry"


def test_the_spec_is_where_each_option_is_declared(counts: Dict[str, List[str]]) -> None:
    spec = "plugins/module_utils/model/drain_spec.py"
    assert all(spec in named for named in counts.values())
    assert {"plugins/doc_fragments/drain.py", "roles/node_maintenance/meta/argument_specs.yml"} <= set(
        counts["delete_emptydir_data"]), "the generated copies are counted"


def test_the_common_words_are_drain_options() -> None:
    """The options left uncounted are still options (a renamed one would be counted again)."""
    assert set(drain_spec.DRAIN) >= COMMON_WORDS and set(KNOWN_OVER) <= set(COUNTED)
