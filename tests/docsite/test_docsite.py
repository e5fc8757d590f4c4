"""The docs site hack/docsite builds (antsibull-docs and Sphinx, .cache/docsite), opened in
headless chromium as a reader opens it: every module, plugin and the role has its page, and
nmo_drain's page and the role's show what their documentation says (the title, options,
return values, the role's entry point), read from the DOM the browser built. A screenshot of
each is kept beside the site (.cache/docsite/screenshots/). hack/test lint builds the site,
then runs this."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List

import yaml
from browser import chromium, screenshot
from helpers import ROOT

from ansible_collections.nmo.maintenance.plugins.doc_fragments import api_requests
from ansible_collections.nmo.maintenance.plugins.module_utils.specs import CONNECTION, DRAIN, ROLE_DRAIN
from ansible_collections.nmo.maintenance.plugins.modules import nmo_drain

SITE = Path(os.environ.get("NMO_DOCSITE_DIR") or ROOT / ".cache" / "docsite")
HTML = SITE / "build" / "html"
SHOTS = SITE / "screenshots"
ROLE_SPECS = ROOT / "roles" / "node_maintenance" / "meta" / "argument_specs.yml"


class Page(HTMLParser):
    """A rendered page: its h1, its section headings, and for every option or return value
    anchor (``parameter-...``, ``return-...``) the text of the table row that holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.h1 = ""
        self.headings: List[str] = []
        self.rows: Dict[str, str] = {}
        self.links: List[str] = []
        self._heading = ""
        self._in: List[str] = []
        self._row: List[str] = []
        self._row_ids: List[str] = []
        self._link_icon = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("h1", "h2", "h3"):
            self._in.append(tag)
            self._heading = ""
        elif tag == "tr":
            self._row, self._row_ids = [], []
        elif tag == "div" and "ansibleOptionAnchor" in (attrs.get("class") or ""):
            self._row_ids.append(attrs.get("id", ""))
        elif tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
            self._link_icon = "headerlink" in (attrs.get("class") or "")  # the theme's icon, not text

    def handle_endtag(self, tag):
        if tag == "a":
            self._link_icon = False
        if tag in ("h1", "h2", "h3") and self._in:
            self._in.pop()
            text = " ".join(self._heading.split())
            if tag == "h1" and not self.h1:
                self.h1 = text
            self.headings.append(text)
        elif tag == "tr":
            text = " ".join("".join(self._row).split())
            for anchor in self._row_ids:
                self.rows[anchor] = text

    def handle_data(self, data):
        if self._link_icon:
            return
        if self._in:
            self._heading += data
        self._row.append(data)


def rendered(name: str) -> Page:
    """The page as chromium built its DOM (scripts run), parsed."""
    path = HTML / name
    assert path.exists(), f"{path} is missing: build the site with hack/docsite (hack/test lint does)"
    dumped = chromium("--dump-dom", path.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    page = Page()
    page.feed(dumped.stdout)
    assert page.h1, f"{name}: no title in the rendered page"
    return page


def shot(name: str, picture: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    screenshot((HTML / name).as_uri(), SHOTS / picture, 1280, 1600)


def choices(default: bool) -> str:
    """A boolean's choices as the page shows them, its default marked."""
    return "Choices: false ← (default) true" if default is False else "Choices: false true ← (default)"


def test_every_module_plugin_and_the_role_has_a_page_the_home_page_links() -> None:
    home = rendered("index.html")
    assert home.h1.startswith("Nmo.Maintenance"), home.h1
    wanted = [f"{p.stem}_module.html" for p in sorted((ROOT / "plugins" / "modules").glob("nmo_*.py"))]
    for kind in ("inventory", "callback", "filter"):
        wanted += [f"{p.stem}_{kind}.html" for p in sorted((ROOT / "plugins" / kind).glob("*.py"))]
    wanted.append("node_maintenance_role.html")
    linked = {link.split("#")[0] for link in home.links}
    assert [page for page in wanted if page not in linked] == []
    assert [page for page in wanted if not (HTML / page).exists()] == []


def test_nmo_drains_page_shows_its_title_options_and_return_values() -> None:
    page = rendered("nmo_drain_module.html")
    assert page.h1 == ("nmo.maintenance.nmo_drain module – Drain a node in parallel, respecting "
                       "PodDisruptionBudgets, with live progress")
    # every option of the module's spec, the connection's from their fragment included
    missing = [name for name in [*nmo_drain.ARGUMENT_SPEC, *CONNECTION] if f"parameter-{name}" not in page.rows]
    assert missing == []
    assert "How the node is drained, one dict for every drain option" in page.rows["parameter-drain"]
    assert page.rows["parameter-drain/force"].startswith("force boolean")
    assert choices(DRAIN["force"]["default"]) in page.rows["parameter-drain/force"]
    # a return value of the module's own, and one of the shared fragment's, as written there
    assert "Pods whose eviction was accepted and that are gone." in page.rows["return-evicted"]
    shared = yaml.safe_load(api_requests.ModuleDocFragment.RETURN)["api_requests"]
    row = page.rows["return-api_requests"]
    assert row.startswith("api_requests integer") and shared["description"][0] in row
    assert "Returned: success" in row and "Sample: 14" in row
    shot("nmo_drain_module.html", "nmo_drain.png")


def test_the_roles_page_shows_its_entry_point_and_every_option_of_it() -> None:
    page = rendered("node_maintenance_role.html")
    assert page.h1.startswith("nmo.maintenance.node_maintenance role – Take one node"), page.h1
    assert any(h.startswith("Entry point main") for h in page.headings), page.headings
    options = yaml.safe_load(ROLE_SPECS.read_text())["argument_specs"]["main"]["options"]
    missing = [name for name in options if f"parameter-main--{name}" not in page.rows]
    assert missing == []
    force = page.rows["parameter-main--node_maintenance_drain/force"]
    assert force.startswith("force boolean") and choices(ROLE_DRAIN.get("force", DRAIN["force"]["default"])) in force
    kind = page.rows["parameter-main--node_maintenance_notify/kind"]
    # Sphinx prints typographic apostrophes
    assert "an incoming webhook (also Mattermost\u2019s and Rocket.Chat\u2019s)" in kind and '"teams"' in kind
    shot("node_maintenance_role.html", "node_maintenance.png")
