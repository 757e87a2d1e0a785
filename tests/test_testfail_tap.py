"""TAP failures (node --test prints TAP into a pipe, which is how Claude Code runs it; tap, prove): the ids,
the nesting, what is not a failure, and the error taken from the test's YAML block."""

from __future__ import annotations

from ctxlifed.core.testfail import failure_lines


def test_nested_tests_are_named_by_their_subtest_chain() -> None:
    out = ("# Subtest: api\n    # Subtest: users\n        # Subtest: creates one\n        not ok 1 - creates one\n"
           "          ---\n          error: 'boom'\n          ...\n        # Subtest: lists\n        ok 2 - lists\n"
           "        1..2\n    not ok 1 - users\n      ---\n      failureType: 'subtestsFailed'\n"
           "      error: '1 subtest failed'\n      ...\n    # Subtest: deletes\n    not ok 2 - deletes\n1..1\n")
    assert failure_lines(out) == [("api › users › creates one", "boom"), ("api › deletes", "")]


def test_todo_and_skip_directives_are_not_failures_but_an_escaped_hash_is_a_name() -> None:
    out = ("not ok 1 - later # TODO not written\nnot ok 2 - flaky # SKIP on CI\nnot ok 3 - handles \\# signs\n"
           "not ok 4\nnot ok 5 - timed # time=12.5ms\nnot ok 6 - skipped too #skip\n")
    assert failure_lines(out) == [("handles \\# signs", ""), ("timed", "")]


def test_the_error_is_the_blocks_error_joined_or_unquoted() -> None:
    out = ("not ok 1 - strict\n  ---\n  duration_ms: 1.5\n  error: |-\n    Expected values to be strictly equal:\n"
           "    \n    1 !== 2\n    \n  code: 'ERR_ASSERTION'\n  stack: |-\n    at x (a.js:1:1)\n  ...\n"
           "not ok 2 - quoted\n  ---\n  error: \"Cannot read properties of null (reading 'x')\"\n  ...\n"
           "not ok 3 - single\n  ---\n  error: 'it''s broken'\n  ...\n"
           "not ok 4 - tap message\n  ---\n  message: 'should be equal'\n  ...\n"
           "not ok 5 - prove style\n#   Failed test 'prove style'\n#   at t/basic.t line 9.\n")
    assert failure_lines(out) == [
        ("strict", "Expected values to be strictly equal: 1 !== 2"),
        ("quoted", "Cannot read properties of null (reading 'x')"),
        ("single", "it's broken"),
        ("tap message", "should be equal"),
        ("prove style", ""),
    ]


def test_the_error_block_is_read_only_up_to_its_end() -> None:
    out = "not ok 1 - a\n  ---\n  duration_ms: 1\n  ...\nnot ok 2 - b\n  ---\n  error: 'b broke'\n  ...\n"
    assert failure_lines(out) == [("a", ""), ("b", "b broke")]
