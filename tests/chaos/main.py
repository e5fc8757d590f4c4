"""hack/chaos: draw schedules from a seed, run them against the local cluster, check the
invariants (tests/chaos/explorer.py; docs/reliability.md).

    hack/chaos --seed S --schedules K      K schedules, seeds S, S+1, ...: one line each, then
                                           "K schedules, V violations"
    hack/chaos --self-check                one schedule a broken variant of the rules (the
                                           run's stop mark, the budgets, a quarantine's count),
                                           each must report a violation
    hack/chaos --seed S --variant V        a schedule against a broken variant (replay)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import List

from explorer import BREAKS, SELF_CHECK_SEEDS, Explorer, Outcome, as_json, broken_copy, draw, faults_by_kind, line, replay_command

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import Cluster, _cluster_env  # noqa: E402


def report(outcome: Outcome, variant: str = "") -> None:
    print(line(outcome, variant), flush=True)
    for text in outcome.violations:
        print(f"  violation: {text}", flush=True)
    if outcome.violations:
        print(f"  schedule: {as_json(outcome)}", flush=True)
        print(f"  replay: {replay_command(outcome.schedule.seed, variant)}", flush=True)
        print(f"  audit log excerpt and the runs' output: {outcome.log}", flush=True)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="hack/chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schedules", type=int, default=1)
    parser.add_argument("--variant", choices=sorted(BREAKS), default="")
    parser.add_argument("--self-check", action="store_true")
    parser.add_argument("--workdir", default="")
    parser.add_argument("--keep", action="store_true", help="keep every schedule's output, not only a violation's")
    args = parser.parse_args(argv)
    cluster = Cluster(_cluster_env())
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="nmo-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.self_check:
        missed = []
        for variant, seed in SELF_CHECK_SEEDS.items():
            with tempfile.TemporaryDirectory(dir=workdir) as copy:
                outcome = Explorer(cluster, workdir, broken_copy(variant, Path(copy))).explore(draw(seed, variant))
            print(f"self-check {variant}: {len(outcome.violations)} violation(s)"
                  + (f": {outcome.violations[0]}" if outcome.violations else " (missed)"), flush=True)
            if not outcome.violations:
                missed.append(variant)
        print(f"self-check: {len(SELF_CHECK_SEEDS) - len(missed)} of {len(SELF_CHECK_SEEDS)} broken variants caught",
              flush=True)
        return 1 if missed else 0
    outcomes = []
    for seed in range(args.seed, args.seed + args.schedules):
        if args.variant:
            with tempfile.TemporaryDirectory(dir=workdir) as copy:
                outcome = Explorer(cluster, workdir, broken_copy(args.variant, Path(copy)), args.keep).explore(
                    draw(seed, args.variant))
        else:
            outcome = Explorer(cluster, workdir, keep=args.keep).explore(draw(seed))
        report(outcome, args.variant)
        outcomes.append(outcome)
    violations = sum(len(o.violations) for o in outcomes)
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(faults_by_kind(outcomes).items()))
    print(f"faults injected: {kinds or 'none'}")
    print(f"{len(outcomes)} schedules, {violations} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
