"""The mutation report: its scores hold their floors, and it is what `make mutate` produces.

A full run takes minutes per module, so this file re-runs only the modules a change touched:
each committed entry carries a fingerprint of its module, its tests and its configuration,
and an entry whose fingerprint still matches is what the command would produce again. The
touched modules are re-run here when they hold at most ``MAX_RERUN_MUTANTS`` mutants between
them (past that, or for a module with no committed entry, the test fails and names ``make
mutate``), and the test fails when one drops below its floor or differs from its committed entry.
"""

from __future__ import annotations

import copy

import pytest

from tools.mutation import ModuleSpec, load_config, load_report, reclassify, run, stale

# The bars of the contract: the modules holding grounding, the answer states, the deadline,
# the spend bound and the bucket arithmetic at 95%, every other module at 90%.
CORE = {"grounding", "answer-states", "deadline", "spend", "bucket"}
# What CI may re-run, in mutants: on two cores shared with other work a mutant took 0.3 to 1.0 s
# (spend's 462 took six minutes), so this keeps the re-run within five minutes; a module past it
# alone (spend, the gate's checks) is re-run with `make mutate` and committed.
MAX_RERUN_MUTANTS = 400


@pytest.fixture(scope="module")
def specs(root):
    return load_config(root)


@pytest.fixture(scope="module")
def report(root):
    return load_report(root)


def test_floors_are_the_contract_bars(specs):
    assert set(specs) >= CORE, "every core module is mutated"
    for name, spec in specs.items():
        assert spec.floor >= (0.95 if name in CORE else 0.90), f"{name}: floor {spec.floor} is under its bar"


def below_floor(report, specs) -> dict[str, tuple[float, float]]:
    return {n: (e["score"], specs[n].floor) for n, e in report["modules"].items() if e["score"] < specs[n].floor}


def test_every_module_has_a_committed_entry_at_or_above_its_floor(specs, report):
    assert list(report["modules"]) == list(specs), "run `make mutate` and commit eval/results/mutation.json"
    assert not below_floor(report, specs), f"score below floor: {below_floor(report, specs)}"


def test_a_score_below_its_floor_is_named(specs, report):
    doctored = copy.deepcopy(report)
    doctored["modules"]["grounding"]["score"] = 0.9499
    assert below_floor(doctored, specs) == {"grounding": (0.9499, 0.95)}


def test_entries_are_consistent_with_their_survivors(specs, report):
    """Counts, score and reasons follow from the committed survivors under eval/mutation.yaml
    (after editing its equivalents or floors: `python -m tools.mutation --reclassify`)."""
    for name, e in report["modules"].items():
        assert e["killed"] + e["survived"] == e["mutants"], name
        assert reclassify(specs[name], e) == e, f"{name}: run `python -m tools.mutation --reclassify`"


def test_every_named_equivalent_excuses_a_survivor(specs, report):
    """An equivalent whose mutant no longer survives with that diff is stale config, not a reason."""
    for name, spec in specs.items():
        survivors = {s["mutant"]: s["diff"] for s in report["modules"][name]["survivors"]}
        for e in spec.equivalent:
            assert survivors.get(e.mutant) == list(e.diff), f"{name}: {e.mutant} is named equivalent but not a survivor"


def _summary(entry: dict) -> str:
    left = [f"{s['mutant']}: {' / '.join(s['diff'])}" for s in entry["survivors"] if not s["equivalent"]]
    return f"score {entry['score']:.3f}, floor {entry['floor']}; survivors not named equivalent: {left or 'none'}"


def rerun_problems(fresh: dict, committed: dict, specs) -> list[str]:
    """What is wrong with re-run entries: a score under its floor, a result unlike the committed one."""
    problems = []
    for name, entry in fresh.items():
        if entry["score"] < specs[name].floor:
            problems.append(f"{name} fell below its floor: {_summary(entry)}")
        same = {k: v for k, v in entry.items() if k != "fingerprint"} == {
            k: v for k, v in committed.get(name, {}).items() if k != "fingerprint"
        }
        if not same:
            problems.append(
                f"{name} differs from the committed entry ({_summary(entry)}): "
                f"run `make mutate MODULES={name}` and commit eval/results/mutation.json"
            )
    return problems


def too_much_to_rerun(touched: list[str], report: dict) -> str | None:
    """Why CI should not re-run ``touched`` itself (a module never run, or too many mutants), or None."""
    done = report["modules"]
    cost = sum(done[n]["mutants"] for n in touched if n in done)
    if all(n in done for n in touched) and cost <= MAX_RERUN_MUTANTS:
        return None
    return (
        f"changed since eval/results/mutation.json was written: {', '.join(touched)} "
        f"({cost} mutants{', and modules never run' if any(n not in done for n in touched) else ''}; "
        f"CI re-runs at most {MAX_RERUN_MUTANTS}): run `make mutate MODULES='{' '.join(touched)}'` "
        "and commit the report"
    )


def test_the_rerun_budget_names_make_mutate_past_it(report):
    done = report["modules"]
    small = min(done, key=lambda n: done[n]["mutants"])
    assert too_much_to_rerun([small], report) is None
    # a module past the budget alone is re-run by `make mutate` and committed
    big = [n for n in done if done[n]["mutants"] > MAX_RERUN_MUTANTS]
    for n in big:
        assert f"make mutate MODULES='{n}'" in (too_much_to_rerun([n], report) or "")
    everything = too_much_to_rerun(list(done), report)
    assert everything is not None and f"make mutate MODULES='{' '.join(done)}'" in everything
    assert "never run" in (too_much_to_rerun(["new-module"], report) or "")


def test_touched_modules_are_re_run_and_hold(root, specs, report):
    touched = stale(root, specs, report)
    if not touched:
        return
    problem = too_much_to_rerun(touched, report)
    assert problem is None, problem
    fresh = run(root, touched, verbose=False)["modules"]
    problems = rerun_problems({n: fresh[n] for n in touched}, report["modules"], specs)
    assert not problems, "\n".join(problems)


def test_a_re_run_that_loses_a_kill_fails_twice(specs, report):
    """A touched module whose re-run kills one mutant fewer is named: under its floor, and stale."""
    entry = copy.deepcopy(report["modules"]["deadline"])
    entry["killed"] -= 1
    entry["survived"] += 1
    entry["score"] = 0.9
    entry["survivors"].append({"mutant": "m", "status": "survived", "diff": ["-a", "+b"], "equivalent": None})
    problems = rerun_problems({"deadline": entry}, report["modules"], specs)
    assert len(problems) == 2
    assert problems[0].startswith("deadline fell below its floor: score 0.900, floor 0.95")
    assert problems[1].startswith("deadline differs from the committed entry")
    assert rerun_problems({"deadline": report["modules"]["deadline"]}, report["modules"], specs) == []


def test_the_stale_check_sees_a_touched_test(root, tmp_path, specs, report):
    """A change to a module's tests moves its fingerprint, so CI re-runs it (the check can turn red)."""
    spec: ModuleSpec = specs["deadline"]
    copy = tmp_path / "project"
    for rel in (spec.path, *spec.tests):
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes((root / rel).read_bytes())
    assert "deadline" not in stale(copy, {"deadline": spec}, report)
    (copy / spec.tests[0]).write_text((root / spec.tests[0]).read_text() + "\n# touched\n")
    assert stale(copy, {"deadline": spec}, report) == ["deadline"]
