"""The cluster-level explorer in CI (tests/chaos/explorer.py; docs/reliability.md).

A fixed list of seeds, chosen for what they cover (named beside each), runs in CI's side lane
on its cluster of its own; any violation fails the test with the explorer's lines, the replay
command and where the audit log excerpt is. The self-check runs one schedule against each
deliberately broken copy of the rules and must see a violation for each: an explorer that cannot
fail proves nothing. ``hack/chaos --schedules 200`` is the soak, run by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .explorer import BREAKS, SELF_CHECK_SEEDS, Explorer, as_json, broken_copy, draw, line, replay_command

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.side_lane]

# seed: what its schedule draws (hack/chaos --seed S prints it whole)
SEEDS = {
    100: "concurrency 2, zone budget 1, quarantine (bound 1), two blocked nodes, an administrator's cordon",
    101: "concurrency 3, one zone, budget 1, skip, ansible-playbook SIGKILLed after 2 nodes reached a hook",
    102: "two slices at once, zone budget 1, the work hook fails (policy keep), an API server restart",
    113: "concurrency 4, zone budget 1, stop, two blocked nodes, the before-drain hook fails (policy keep)",
}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_a_drawn_schedule_keeps_every_invariant(cluster, tmp_path: Path, seed: int) -> None:
    outcome = Explorer(cluster, tmp_path).explore(draw(seed))
    assert not outcome.violations, "\n".join([line(outcome), *outcome.violations, as_json(outcome),
                                              f"replay: {replay_command(seed)}", f"kept: {outcome.log}"])


@pytest.mark.parametrize("variant", sorted(BREAKS))
def test_the_explorer_catches_a_broken_rule(cluster, tmp_path: Path, variant: str) -> None:
    copy = broken_copy(variant, tmp_path / "copy")
    outcome = Explorer(cluster, tmp_path, copy).explore(draw(SELF_CHECK_SEEDS[variant], variant))
    assert outcome.violations, f"the explorer missed the broken rule {variant}: {line(outcome, variant)}"
