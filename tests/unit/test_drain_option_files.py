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
uses it. What keeps an option there:

- the options travel as one object (drain_spec's dataclasses, DrainOptions, PreflightOptions),
  checked by the spec's own ``checks``; a file that only hands an option on hands the object;
- the rule that uses an option words what it did (the tracker's retry, fallback and let-go
  lines, pod_filters' ``letting_go``), and the other messages that tell the operator to
  change an option take its name from drain_spec (its ``*_OPTION`` constants);
- a different thing of the same name has its own (the etcd guard's ``member_selector``, the
  pre-flight's reads' ``workers``), and prose (comments, RBAC files, other modules' docs)
  says what the option does rather than quoting its name.

Options whose name is an ordinary word are not counted: the word names other things across
the code (``timeout`` of leases and waits, RBAC ``rules``, the KubeVirt API's ``kubevirt``,
surge-first's own model for ``surge``, ``force`` in messages), so a count says nothing about
the option. No other option is excepted, and none has a larger budget.
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


def is_doc(path: Path) -> bool:
    return path.suffix == ".md" or path.name.startswith(DOC_NAMES)


def code_files() -> List[Path]:
    return sorted(p for folder in CODE for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc" and not is_doc(p))


def naming(option: str, files: List[Path], root: Path = ROOT) -> List[str]:
    word = re.compile(rf"\b{re.escape(option)}\b")
    return [str(p.relative_to(root)) for p in files if word.search(p.read_text(errors="replace"))]


COUNTED = [name for name in drain_spec.DRAIN if name not in COMMON_WORDS]


@pytest.fixture(scope="module")
def counts() -> Dict[str, List[str]]:
    files = code_files()
    return {option: naming(option, files) for option in COUNTED}


@pytest.mark.parametrize("option", COUNTED)
def test_a_drain_option_is_named_in_few_files(option: str, counts: Dict[str, List[str]]) -> None:
    named = counts[option]
    assert len(named) <= MAX, (
        f"{option} is named in {len(named)} files (at most {MAX}): {named}. Declare it in "
        "plugins/module_utils/model/drain_spec.py only, and let the generated copies (hack/role_docs.py) and "
        "the options objects' fields take it from there: hand the options object on, keep the rule that uses "
        "the option in one file, and take its name for another message from drain_spec")


def test_the_spec_is_where_each_option_is_declared(counts: Dict[str, List[str]]) -> None:
    spec = "plugins/module_utils/model/drain_spec.py"
    assert all(spec in named for named in counts.values())
    assert {"plugins/doc_fragments/drain.py", "roles/node_maintenance/meta/argument_specs.yml"} <= set(
        counts["delete_emptydir_data"]), "the generated copies are counted"


def test_the_common_words_are_drain_options() -> None:
    """The options left uncounted are still options (a renamed one would be counted again)."""
    assert set(drain_spec.DRAIN) >= COMMON_WORDS


def test_the_count_sees_a_file_that_names_an_option(tmp_path: Path) -> None:
    """A whole word counts, in code and comments alike; a longer name that holds it does not."""
    (tmp_path / "rule.py").write_text("pause = opts.retry_delay\n")
    (tmp_path / "note.yml").write_text("# retried every retry_delay seconds\n")
    (tmp_path / "other.yml").write_text("node_maintenance_drain_retry_delay: 2\nretry_delays: []\n")
    assert naming("retry_delay", sorted(tmp_path.iterdir()), tmp_path) == ["note.yml", "rule.py"]
