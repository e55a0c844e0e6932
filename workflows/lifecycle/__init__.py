"""The run-state machine of tasks, groups and workflows: pure rules and the writes that apply them."""
