"""core/wrap_policy.py: when a test or build command may be wrapped (issue 17 item 4), rule matching as a table."""

from __future__ import annotations

import pytest

from ctxlifed.core import wrap_policy as W
from ctxlifed.core.wrap_policy import BashRule, Rules, decide, matches_broadly, matches_narrowly, parse_rule, simple_argv

CWD = "/home/u/proj"


@pytest.mark.parametrize("command, argv", [
    ("pytest", ["pytest"]),
    ("pytest -x -q tests/test_a.py::test_b", ["pytest", "-x", "-q", "tests/test_a.py::test_b"]),
    ("pytest  -k 'a or b'", ["pytest", "-k", "a or b"]),
    ('pytest -k "not slow"', ["pytest", "-k", "not slow"]),
    ("make test", ["make", "test"]),
    ("python3 -m pytest --maxfail=1", ["python3", "-m", "pytest", "--maxfail=1"]),
    ("pytest -k a'b c'", ["pytest", "-k", "ab c"]),
])
def test_simple_commands_give_their_exact_argv(command: str, argv: list[str]) -> None:
    assert simple_argv(command) == argv


@pytest.mark.parametrize("command", [
    "pytest && rm -rf x", "pytest; ls", "pytest | tee log", "pytest || true", "pytest &", "pytest > log",
    "pytest 2>&1", "pytest < in", "pytest $(cat args)", "pytest `cat args`", "pytest $HOME", 'pytest "$X"',
    "pytest tests/*.py", "pytest test_?.py", "pytest {a,b}", "pytest ~/x", "pytest # comment", "pytest\nls",
    "FOO=1 pytest", "'pytest' -x", '"pytest"', "pytest \\; ls", "pytest -k 'unclosed", 'pytest "a!b"',
    "(pytest)", "", "   ", "x" * 3000,
])
def test_anything_but_literal_words_is_refused(command: str) -> None:
    assert simple_argv(command) is None


@pytest.mark.parametrize("rule, parsed", [
    ("Bash", BashRule("any")),
    ("Bash()", BashRule("any")),
    ("Bash(*)", BashRule("any")),
    ("Bash(pytest:*)", BashRule("prefix", "pytest")),
    ("Bash(npm run test:*)", BashRule("prefix", "npm run test")),
    ("Bash(pytest *)", BashRule("wildcard", "pytest *")),
    ("Bash(git * main)", BashRule("wildcard", "git * main")),
    ("Bash(make test)", BashRule("exact", "make test")),
    ("Read(./src/**)", None),
    ("WebFetch", None),
    ("mcp__srv__tool", None),
    ("Bash(pytest", False),
    ("Bash(a\\*b)", False),
    ("Bash(foo(bar))", False),
    ("bash(pytest:*)", False),
    ("*", False),
    (42, False),
])
def test_rules_parse(rule: object, parsed: object) -> None:
    assert parse_rule(rule) == parsed


# (rule, command, narrow (allow reading), broad (deny/ask reading))
MATCHES = [
    ("Bash", "pytest -x", True, True),
    ("Bash(pytest:*)", "pytest", True, True),
    ("Bash(pytest:*)", "pytest -x tests", True, True),
    ("Bash(pytest:*)", "pytestx", False, True),  # no word boundary: only the broad reading
    ("Bash(pytest:*)", "python -m pytest", False, False),
    ("Bash(npm run test:*)", "npm run test -- --watch", True, True),
    ("Bash(npm run test:*)", "npm  run test", False, True),  # whitespace: only the broad reading
    ("Bash(pytest *)", "pytest -x", True, True),
    ("Bash(pytest *)", "pytest", False, True),  # "cmd *" alone: only the broad reading
    ("Bash(pytest *)", "pytestx", False, False),
    ("Bash(pytest*)", "pytestx -q", True, True),
    ("Bash(make * test)", "make -j4 test", True, True),
    ("Bash(make * test)", "make -j4 test extra", False, False),
    ("Bash(make test)", "make test", True, True),
    ("Bash(make test)", "make test-unit", False, False),
    ("Bash(make test)", "make  test", False, True),
    ("Bash(make test)", "make 'test'", False, True),  # same argv: the broad reading
    ("Bash(make:*)", "make test", True, True),
    ("Bash(cargo test:*)", "cargo build", False, False),
]


@pytest.mark.parametrize("rule, command, narrow, broad", MATCHES)
def test_rule_matching_table(rule: str, command: str, narrow: bool, broad: bool) -> None:
    r = parse_rule(rule)
    assert isinstance(r, BashRule)
    argv = simple_argv(command)
    assert argv is not None
    assert matches_narrowly(r, command) is narrow
    assert matches_broadly(r, command, argv) is broad
    assert not narrow or broad  # a doubt never widens what is allowed: narrow implies broad


ALLOW = Rules(allow=("Bash(pytest:*)", "Bash(make test)"))


# (command, mode, rules, wrap?)
DECISIONS = [
    ("pytest -x", "default", ALLOW, True),
    ("pytest -x", "acceptEdits", ALLOW, True),
    ("pytest -x", "dontAsk", ALLOW, True),
    ("pytest -x", "default", Rules(), False),  # no allow rule: Claude Code would ask
    ("pytest -x", "plan", ALLOW, False),
    ("pytest -x", "auto", ALLOW, False),
    ("pytest -x", None, ALLOW, False),
    ("pytest -x", "weird", ALLOW, False),
    ("pytest -x", "bypassPermissions", Rules(), True),
    ("pytest -x", "bypassPermissions", Rules(deny=("Bash(pytest:*)",)), False),
    ("pytest -x", "bypassPermissions", Rules(ask=("Bash(pytest -x)",)), False),
    ("pytest -x", "default", Rules(allow=ALLOW.allow, ask=("Bash(pytest:*)",)), False),  # never ask -> allow
    ("pytest -x", "default", Rules(allow=ALLOW.allow, deny=("Bash(pytest *)",)), False),
    ("pytest -x", "default", Rules(allow=ALLOW.allow, deny=("Bash",)), False),
    ("pytest -x", "default", Rules(allow=ALLOW.allow, deny=("Bash(py:*)",)), False),  # broad: "py" prefix
    ("pytest -x", "default", Rules(allow=ALLOW.allow, deny=("Bash(rm:*)", "Read(.env)")), True),
    ("pytest -x", "default", Rules(allow=ALLOW.allow, ask=("Bash(x\\*)",)), False),  # unreadable ask rule
    ("pytest -x", "default", Rules(allow=("Bash(x\\*)", "Bash(pytest:*)")), True),  # unreadable allow: ignored
    ("pytest -x", "default", Rules(allow=ALLOW.allow, complete=False, why_incomplete="x"), False),
    ("pytest -x", "default", Rules(allow=ALLOW.allow, sandbox=True), False),
    ("pytest -x", "default", Rules(allow=ALLOW.allow, other_hooks="a PreToolUse hook"), False),
    ("pytest -x && rm -rf /", "default", Rules(allow=("Bash",)), False),
    ("pytest -x | tee log", "default", ALLOW, False),
    ("make test", "default", ALLOW, True),
    ("make test-unit", "default", ALLOW, False),
    ("ls -la", "default", Rules(allow=("Bash",)), False),  # not a test or build
    ("timeout 60 pytest", "default", Rules(allow=("Bash",)), False),
    ("/v/bin/ctxlifectl run --session s -- pytest", "default", Rules(allow=("Bash",)), False),  # never twice
    ("pytest /etc/x", "default", ALLOW, False),
    ("pytest ../other", "default", ALLOW, False),
    ("pytest --rootdir=../x", "default", ALLOW, False),
    (f"pytest {CWD}/tests", "default", ALLOW, True),
    ("pytest tests", "default", Rules(allow=("Bash(pytest *)",)), True),
]


@pytest.mark.parametrize("command, mode, rules, wrap", DECISIONS)
def test_decision_table(command: str, mode: object, rules: Rules, wrap: bool) -> None:
    v = decide(command, mode, rules, CWD)
    assert v.wrap is wrap, v.reason
    assert v.reason


def test_the_wrapped_command_keeps_the_original_verbatim_at_its_end() -> None:
    cmd = W.wrapped_command("/opt/x/bin/ctxlifectl", "abc-123", "pytest -k 'a or b'")
    assert cmd == "/opt/x/bin/ctxlifectl run --session abc-123 -- pytest -k 'a or b'"
    # ... and is still seen as the test run it is (phase, lessons, digests of the PostToolUseFailure).
    from ctxlifed.core.commands import is_build_command, is_test_command

    assert is_test_command(cmd) and is_build_command(W.wrapped_command("/x/ctxlifectl", "s", "cargo build"))
    assert not is_test_command("/x/ctxlifectl run --session s -- ls")
