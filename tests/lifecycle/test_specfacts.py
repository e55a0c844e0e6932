"""What the lifecycle reads of a stored spec (docs/design.md §6, "Lead and exit actions"): a text that
spells neither ``ignoreNonleadStatus`` nor ``exitActions`` is not parsed, and a text that escapes one of
their characters still is. No database."""

from __future__ import annotations

from workflows.lifecycle.specfacts import SpecFacts, spec_facts

GROUP = """
workflow:
  name: facts
  groups:
  - name: g{group}
    tasks:
    - {{name: a, lead: true, image: busybox, command: [true]{a}}}
    - {{name: b, image: busybox, command: [true]}}
"""


def test_a_spec_without_either_key_has_osmos_defaults():
    # given a spec naming neither key
    text = GROUP.format(group="", a="")
    # when its facts are read
    facts = spec_facts(text)
    # then the lead decides every group and no task has exit actions
    assert facts == SpecFacts()
    assert (facts.ignores_nonlead("g"), facts.actions_of("a")) == (True, ())


def test_exit_actions_and_ignore_nonlead_status_are_read():
    # given a group that counts every task and a lead that completes on 0 and 3
    text = GROUP.format(group="\n    ignoreNonleadStatus: false", a=", exitActions: {COMPLETE: '0,3'}")
    # when its facts are read
    facts = spec_facts(text)
    # then both are found
    assert (facts.ignores_nonlead("g"), facts.actions_of("a")) == (False, (("COMPLETE", ((0, 0), (3, 3))),))


def test_a_key_spelled_with_an_escape_is_still_read():
    # given both keys written as double-quoted YAML with an escaped character (not spelled out in the text)
    text = GROUP.format(group='\n    "ignoreNonlead\\x53tatus": false', a=', "exit\\u0041ctions": {FAIL: 0}')
    assert "exitActions" not in text and "ignoreNonleadStatus" not in text
    # when its facts are read
    facts = spec_facts(text)
    # then they are found as if spelled out
    assert (facts.ignores_nonlead("g"), facts.actions_of("a")) == (False, (("FAIL", ((0, 0),)),))
