"""Residency hygiene (issue 19 item 1): the pure checks and the reader, on a real-looking HOME and project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlifed.core import residency as R
from ctxlifed.core.model import estimate_tokens
from ctxlifed.runtime import residency_files as RF

# -- a HOME and a project -------------------------------------------------------------------------

LONG_DESC = ("Formats release notes. " + "Use it whenever the user mentions changelogs, version bumps or tags; " * 30
             + "KEYWORD-AT-THE-END")
BIG_BODY = "\n".join(f"{i}. Always check the invariant number {i} of the payment ledger before touching it."
                     for i in range(1, 1200))


def _w(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    proj = tmp_path / "work" / "shop"
    cfg = home / ".claude"
    # user skills
    _w(cfg / "skills" / "release-notes" / "SKILL.md", f"---\nname: release-notes\ndescription: {LONG_DESC}\n---\n"
       "Write the notes.\n")
    _w(cfg / "skills" / "deploy-prod" / "SKILL.md",
       "---\nname: deploy-prod\ndescription: Deploy the current branch to production with kubectl apply\n"
       "allowed-tools: Bash(kubectl apply *) Bash(git push *)\n---\nRun `kubectl apply -f k8s/`.\n")
    _w(cfg / "skills" / "commit-helper" / "SKILL.md",
       "---\nname: commit-helper\ndescription: Write a commit message and commit the staged changes\n"
       "disable-model-invocation: true\n---\nCommit.\n")
    _w(cfg / "CLAUDE.md", "# Me\n\nPrefer short answers.\n")
    _w(cfg / "settings.json", json.dumps({"enabledPlugins": {"audit-kit@labmkt": True, "off@labmkt": False}}))
    _w(cfg / "plugins" / "cache" / "labmkt" / "audit-kit" / "0.2.0" / "skills" / "dep-audit" / "SKILL.md",
       "---\nname: dep-audit\ndescription: >\n  Audit every dependency across the codebase\n  for licences and CVEs.\n"
       "allowed-tools: Read Grep Glob Bash(git log *)\n---\nScan all files named package.json and report.\n")
    _w(cfg / "plugins" / "cache" / "labmkt" / "off" / "1.0.0" / "skills" / "x" / "SKILL.md",
       "---\ndescription: research everything\n---\nbody\n")
    # project
    _w(proj / ".git" / "HEAD", "ref: refs/heads/main\n")
    _w(proj / "CLAUDE.md", "# Shop\n\n" + "".join(f"- rule {i}: keep the cart total in cents\n" for i in range(260)))
    _w(proj / "CLAUDE.local.md", "My sandbox DB is on port 5433.\n")
    _w(Path(RF.transcript_dir(str(cfg), str(proj))) / "memory" / "MEMORY.md", "- [Cart](cart.md) — totals in cents\n")
    _w(proj / ".claude" / "skills" / "ledger-rules" / "SKILL.md",
       f"---\nname: ledger-rules\ndescription: Payment ledger invariants\n---\n{BIG_BODY}\n")
    _w(proj / ".claude" / "skills" / "explore-api" / "SKILL.md",
       "---\nname: explore-api\ndescription: Explore the HTTP API surface and list endpoints\n"
       "allowed-tools:\n  - Read\n  - Grep\n  - Glob\n---\nFind all route declarations.\n")
    _w(proj / ".claude" / "skills" / "forked-sweep" / "SKILL.md",
       "---\nname: forked-sweep\ndescription: Investigate flaky tests\ncontext: fork\nagent: Explore\n---\nGo.\n")
    _w(proj / ".claude" / "rules" / "api-conventions.md",
       "---\npaths:\n  - \"src/api/**/*.ts\"\n---\nAll handlers return problem+json on error.\n")
    _w(proj / ".claude" / "rules" / "style.md", "Use tabs.\n")
    _w(proj / ".mcp.json", json.dumps({"mcpServers": {"github": {"command": "gh-mcp"}, "pg": {"command": "pg-mcp"}}}))
    _w(home / ".claude.json", json.dumps({"mcpServers": {"browser": {"command": "pw"}},
                                          "projects": {str(proj): {"mcpServers": {"jira": {"url": "http://x"}}}}}))
    return home, proj


def _by(rep: R.Report, code: str) -> list[R.Finding]:
    return [f for f in rep.findings if f.code == code]


# -- frontmatter ------------------------------------------------------------------------------------

def test_frontmatter_scalars_blocks_and_lists() -> None:
    meta, body = R.parse_frontmatter("---\nname: 'x'\ndescription: >\n  one\n  two\npaths: [a/*, \"b/**\"]\n"
                                     "tools:\n  - Read\n  - Grep\nflag: yes\n---\nBody\n")
    assert meta == {"name": "x", "description": "one two", "paths": ["a/*", "b/**"], "tools": ["Read", "Grep"],
                    "flag": "yes"}
    assert body == "Body\n"
    assert R.parse_frontmatter("no frontmatter") == ({}, "no frontmatter")
    assert R.parse_frontmatter("---\nname: x\n")[0] == {}  # unterminated: not frontmatter


# -- skills ---------------------------------------------------------------------------------------

def _skill(name: str, front: str, body: str = "Do it.\n") -> R.Skill:
    return R.Skill(name=name, path=f"/h/.claude/skills/{name}/SKILL.md", scope="user", text=f"---\n{front}\n---\n{body}")


def test_description_past_the_listing_cut_names_the_lost_tail() -> None:
    desc = "a" * 1500 + " TAILWORD " + "b" * 100
    rep = R.check(skills=[_skill("s", f"description: {desc}")])
    [f] = _by(rep, "skill_description_cut")
    assert f.level == "warn"
    assert f"{len(desc):,} characters" in f.message and "last 74 " in f.message
    assert f.tokens == estimate_tokens(desc[1536:])
    # exactly at the cut: nothing lost
    assert not _by(R.check(skills=[_skill("s", "description: " + "a" * 1536)]), "skill_description_cut")
    # description + when_to_use together count
    assert _by(R.check(skills=[_skill("s", f"description: {'a' * 1000}\nwhen_to_use: {'b' * 600}")]),
               "skill_description_cut")


def test_body_over_5k_tokens_says_how_much_a_compaction_cuts() -> None:
    body = "x" * (4 * 6000)  # 6,000 estimated tokens
    [f] = _by(R.check(skills=[_skill("big", "description: d", body)]), "skill_body_over_5k")
    assert f.tokens == 6000
    assert "6,000 tokens (estimated)" in f.message and "last 1,000 are lost" in f.message
    assert not _by(R.check(skills=[_skill("ok", "description: d", "x" * 4 * 5000)]), "skill_body_over_5k")


def test_side_effects_want_disable_model_invocation_and_report_the_listing_saving() -> None:
    sk = _skill("deploy", "description: Deploy the service to production")
    rep = R.check(skills=[sk])
    [f] = _by(rep, "skill_side_effects")
    assert "disable-model-invocation: true" in f.fix
    assert f.tokens == estimate_tokens("- deploy: Deploy the service to production") == rep.listing_tokens
    for harmless in ("Formats release notes from the changelog", "Explains the database migration guide",
                     "Reads the notification settings page"):
        assert not _by(R.check(skills=[_skill("h", f"description: {harmless}")]), "skill_side_effects"), harmless
    for risky in ("Commit the staged changes with a message", "Send a message to the team", "Run the migrations",
                  "Cut a release and tag it", "部署到生产环境"):
        assert _by(R.check(skills=[_skill("r", f"description: {risky}")]), "skill_side_effects"), risky
    plug = R.Skill(name="ship", path="/c/skills/ship/SKILL.md", scope="plugin:ops", text="---\ndescription: Deploy\n---\n")
    assert "with /ops:ship;" in _by(R.check(skills=[plug]), "skill_side_effects")[0].fix
    done = R.check(skills=[_skill("deploy", "description: Deploy it\ndisable-model-invocation: true")])
    assert not _by(done, "skill_side_effects") and done.listing_tokens == 0


def test_read_only_sweep_wants_context_fork_but_not_when_it_writes_or_forks() -> None:
    assert _by(R.check(skills=[_skill("a", "description: Audit all files for TODOs\nallowed-tools: Read Grep")]),
               "skill_should_fork")
    assert not _by(R.check(skills=[_skill("a", "description: Audit all files\nallowed-tools: Read Edit")]),
                   "skill_should_fork")
    assert not _by(R.check(skills=[_skill("a", "description: Audit all files\ncontext: fork")]),
                   "skill_should_fork")
    assert not _by(R.check(skills=[_skill("a", "description: Format a date")]), "skill_should_fork")
    # a weak word ("review") alone flags only a skill whose declared tools are all read-only
    assert not _by(R.check(skills=[_skill("a", "description: Review the open PR")]), "skill_should_fork")
    assert _by(R.check(skills=[_skill("a", "description: Review the open PR\nallowed-tools: Read, Grep")]),
               "skill_should_fork")


# -- instructions ---------------------------------------------------------------------------------

def test_path_rule_is_dropped_at_compaction_unscoped_rule_and_claude_md_reattached() -> None:
    ins = [R.Instruction("/p/CLAUDE.md", "project", "Use cents.\n"),
           R.Instruction("/p/.claude/rules/api.md", "rule", "---\npaths: src/api/**\n---\nproblem+json\n"),
           R.Instruction("/p/.claude/rules/style.md", "rule", "Tabs.\n")]
    rep = R.check(instructions=ins)
    [drop] = _by(rep, "path_rule_dropped")
    assert drop.path == "/p/.claude/rules/api.md" and "src/api/**" in drop.message
    [back] = _by(rep, "reattached")
    assert "/p/CLAUDE.md" in back.message and "style.md" in back.message and "api.md" not in back.message
    assert rep.instruction_tokens == estimate_tokens("Use cents.\n") + estimate_tokens("Tabs.\n") == back.tokens


def test_large_claude_md_warns_with_its_size() -> None:
    text = "".join(f"line {i} of the project conventions, kept short\n" for i in range(600))
    rep = R.check(instructions=[R.Instruction("/p/CLAUDE.md", "project", text)])
    warns = _by(rep, "instructions_size")
    assert {f.subject for f in warns} == {"project CLAUDE.md", "always-resident instructions"}
    assert all(f.tokens == estimate_tokens(text) for f in warns)
    assert "600 lines" in warns[0].message or "600 lines" in warns[1].message


# -- MCP ------------------------------------------------------------------------------------------

def _tool(name: str, desc_len: int) -> dict:
    return {"name": name, "description": "d" * desc_len, "input_schema": {"type": "object", "properties": {}}}


def test_mcp_tools_from_shape_groups_by_server() -> None:
    shape = [_tool("Read", 10), _tool("mcp__github__create_issue", 400), _tool("mcp__github__list_prs", 200),
             _tool("mcp__plugin_kit_db__query", 40), "junk", {"name": 3}]
    got = R.mcp_tools_from_shape(shape)
    assert set(got) == {"github", "plugin_kit_db"}
    assert [n for n, _ in got["github"]] == ["mcp__github__create_issue", "mcp__github__list_prs"]
    assert got["github"][0][1] == estimate_tokens(json.dumps(shape[1], separators=(",", ":")))
    assert R.mcp_tools_from_shape("nope") == {}


def test_mcp_dominating_the_system_zone_is_itemized() -> None:
    servers = [R.McpServer("github", "project", "/p/.mcp.json", (("mcp__github__a", 9000), ("mcp__github__b", 3000))),
               R.McpServer("pg", "project", "/p/.mcp.json", (("mcp__pg__q", 1000),)),
               R.McpServer("jira", "local", "/h/.claude.json", None)]
    rep = R.check(mcp=servers, system_tokens=20000)
    [w] = _by(rep, "mcp_system_zone")
    assert w.tokens == 13000 and "65% of the System zone's measured 20,000" in w.message
    assert w.message.index("github 12,000") < w.message.index("pg 1,000")
    items = _by(rep, "mcp_server")
    assert [f.subject for f in items] == ["MCP github (project)", "MCP pg (project)", "MCP jira (local)"]
    assert items[0].tokens == 12000 and "2 tool definitions" in items[0].message
    assert "not seen" in items[2].message
    assert not _by(R.check(mcp=servers, system_tokens=40000), "mcp_system_zone")
    assert _by(R.check(mcp=servers, system_capacity=10000), "mcp_system_zone")


# -- mid-session changes --------------------------------------------------------------------------

def test_instruction_changed_after_load_warns_once_per_file() -> None:
    rep = R.check(loaded=[R.LoadedInstruction("/p/CLAUDE.md", 100.0, 150.0),
                          R.LoadedInstruction("/p/.claude/rules/a.md", 100.0, 90.0),
                          R.LoadedInstruction("/p/gone.md", 100.0, None)])
    [f] = _by(rep, "instructions_changed")
    assert f.path == "/p/CLAUDE.md" and "/clear or /compact" in f.fix


# -- compact instructions -------------------------------------------------------------------------

def test_compact_instructions_section_and_its_merge_into_claude_md() -> None:
    sec = R.compact_instructions(phase="implementation", decisions=["Use Postgres advisory locks", "Use Postgres advisory locks"],
                                 failing_tests=["FAIL pytest tests/test_cart.py::test_total"],
                                 active_files=["src/cart.py"])
    assert sec.startswith("# Compact instructions\n")
    assert "implementation" in sec and sec.count("Use Postgres advisory locks") == 1
    assert "`FAIL pytest tests/test_cart.py::test_total`" in sec and "`src/cart.py`" in sec
    base = "# Shop\n\nUse cents.\n"
    merged = R.with_compact_instructions(base, sec)
    assert merged == base + "\n" + sec
    # replaced in place, the following top-level section kept
    old = "# Shop\n\n# Compact instructions\n\nkeep stuff\n\n## sub\nold\n\n# Other\nkeep me\n"
    again = R.with_compact_instructions(old, sec)
    assert "keep stuff" not in again and "old" not in again.split("# Other")[0]
    assert again.endswith("# Other\nkeep me\n") and again.count("# Compact instructions") == 1
    assert R.with_compact_instructions(again, sec) == again  # idempotent


# -- the reader on a real-looking tree ------------------------------------------------------------

def test_reader_finds_every_kind_of_file(tree: tuple[Path, Path]) -> None:
    home, proj = tree
    inp = RF.read_inputs(str(proj), home=str(home), env={})
    names = {(s.scope, s.name) for s in inp["skills"]}
    assert names == {("user", "release-notes"), ("user", "deploy-prod"), ("user", "commit-helper"),
                     ("project", "ledger-rules"), ("project", "explore-api"), ("project", "forked-sweep"),
                     ("plugin:audit-kit", "dep-audit")}  # the disabled plugin is not read
    kinds = sorted((Path(i.path).name, i.kind) for i in inp["instructions"])
    assert kinds == [("CLAUDE.local.md", "local"), ("CLAUDE.md", "project"), ("CLAUDE.md", "user"),
                     ("MEMORY.md", "memory"), ("api-conventions.md", "rule"), ("style.md", "rule")]
    assert sorted((m.name, m.scope) for m in inp["mcp"]) == [("browser", "user"), ("github", "project"),
                                                              ("jira", "local"), ("pg", "project")]


def test_gather_on_the_tree_gives_each_finding_once(tree: tuple[Path, Path]) -> None:
    home, proj = tree
    rep = RF.gather(str(proj), home=str(home), env={})
    got = {(f.code, f.subject) for f in rep.findings}
    assert ("skill_description_cut", "skill release-notes (user)") in got
    assert ("skill_side_effects", "skill deploy-prod (user)") in got
    assert ("skill_body_over_5k", "skill ledger-rules (project)") in got
    assert ("skill_should_fork", "skill explore-api (project)") in got
    assert ("skill_should_fork", "skill dep-audit (plugin:audit-kit)") in got
    assert not any(s.startswith(("skill commit-helper", "skill forked-sweep")) for _, s in got)
    assert ("path_rule_dropped", "rule api-conventions.md") in got
    assert ("instructions_size", "project CLAUDE.md") in got
    assert sum(1 for c, _ in got if c == "mcp_server") == 4
    assert len(rep.findings) == len(got)
    lines = R.render_lines(rep)
    assert lines[0].startswith("resident every turn (estimated): skill listing ")
    assert "(7 skills)" in lines[0]
    note = R.note_text(rep, ctl="/x/ctxlifectl")
    assert note.endswith("All of them: /x/ctxlifectl doctor --context") and "- … " in note


def test_mcp_tool_tokens_from_the_newest_transcript(tree: tuple[Path, Path]) -> None:
    home, proj = tree
    tdir = Path(RF.transcript_dir(str(home / ".claude"), str(proj)))
    tools = [_tool("Bash", 50)] + [_tool(f"mcp__github__t{i}", 4000) for i in range(6)] + [_tool("mcp__pg__q", 100)]
    shape = {"type": "api-request-shape", "sessionId": "s", "shape": {"system": "…", "tools": tools}}
    older = dict(shape, shape={"tools": [_tool("mcp__github__old", 1)]})
    _w(tdir / "abc.jsonl", "\n".join(json.dumps(x) for x in ({"type": "user"}, older, shape, {"type": "assistant"})) + "\n")
    rep = RF.gather(str(proj), home=str(home), env={}, system_tokens=10000)
    gh = next(f for f in rep.findings if f.subject == "MCP github (project)")
    assert gh.tokens == sum(estimate_tokens(json.dumps(t, separators=(",", ":"))) for t in tools[1:7])
    assert "6 tool definitions" in gh.message
    assert rep.mcp_tokens == gh.tokens + estimate_tokens(json.dumps(tools[7], separators=(",", ":")))
    assert _by(rep, "mcp_system_zone")
    assert next(f for f in rep.findings if f.subject == "MCP browser (user)").message.startswith("configured;")


REAL = Path(__file__).parent / "fixtures" / "claude-code" / "residency"


@pytest.mark.parametrize(("fixture", "expect"), [
    # Claude Code 2.1.328 with a 3-tool stdio MCP server "inventory" (.mcp.json), ENABLE_TOOL_SEARCH=false:
    # the definitions are in the request's tool list
    ("mcp-loaded.jsonl", "3 tool definitions, 987 tokens (estimated) in the System zone; largest: t2 479"),
    # the same with tool search on (the default): only the names are listed (deferred_tools_delta)
    ("mcp-deferred.jsonl", "3 tools deferred behind tool search: only their names are resident"),
])
def test_mcp_from_real_transcripts(tmp_path: Path, fixture: str, expect: str) -> None:
    proj = tmp_path / "project"
    _w(proj / ".mcp.json", json.dumps({"mcpServers": {"inventory": {"command": "python3"}, "idle": {"command": "x"}}}))
    rep = RF.gather(str(proj), home=str(tmp_path / "home"), env={}, transcript=str(REAL / fixture))
    inv = next(f for f in rep.findings if f.subject == "MCP inventory (project)")
    assert inv.message.startswith(expect), inv.message
    idle = next(f for f in rep.findings if f.subject == "MCP idle (project)")
    assert idle.message.startswith("configured;")
    assert rep.mcp_tokens == (987 if fixture == "mcp-loaded.jsonl" else None)


def test_reader_survives_broken_files(tmp_path: Path) -> None:
    home, proj = tmp_path / "h", tmp_path / "p"
    _w(home / ".claude.json", "{not json")
    _w(proj / ".mcp.json", "[1, 2]")
    _w(home / ".claude" / "settings.json", json.dumps({"enabledPlugins": {"../../etc@x": True, "a@b": True}}))
    (proj / ".claude" / "skills" / "noskill").mkdir(parents=True)
    rep = RF.gather(str(proj), home=str(home), env={})
    assert rep.findings == () and rep.skills == 0


# -- the CLI --------------------------------------------------------------------------------------

def _ctl(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR",)}
    env.update(HOME=str(home), CTXLIFED_SOCKET=str(home / "nosock"))
    return subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_doctor_context_prints_the_findings(tree: tuple[Path, Path]) -> None:
    home, proj = tree
    r = _ctl("doctor", "--context", home=home, cwd=proj)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()[:2]
    assert first == f"project {proj}" and second.startswith("resident every turn (estimated)")
    assert "skill deploy-prod (user)" in r.stdout and "disable-model-invocation: true" in r.stdout
    j = _ctl("doctor", "--context", "--json", home=home, cwd=proj)
    data = json.loads(j.stdout)
    assert {f["code"] for f in data["findings"]} >= {"skill_side_effects", "path_rule_dropped", "mcp_server"}
    assert data["listing_tokens"] > 0 and data["estimated"] is True


def test_request_shape_near_the_start_of_a_long_transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code writes a request shape once per distinct shape: in a long session the last one may
    be at the start, far from the tail; the head is read too (never the middle)."""
    monkeypatch.setattr(RF, "MAX_END_BYTES", 4096)
    shape = {"type": "api-request-shape", "shape": {"tools": [_tool("mcp__pg__query", 100)]}}
    filler = json.dumps({"type": "user", "message": {"content": "x" * 200}})
    t = _w(tmp_path / "t.jsonl", "\n".join([json.dumps(shape)] + [filler] * 200) + "\n")
    assert [x["name"] for x in RF.last_request_tools(str(t)) or []] == ["mcp__pg__query"]
    middle = _w(tmp_path / "m.jsonl", "\n".join([filler] * 100 + [json.dumps(shape)] + [filler] * 100) + "\n")
    assert RF.last_request_tools(str(middle)) is None
    later = dict(shape, shape={"tools": [_tool("mcp__gh__a", 10)]})
    both = _w(tmp_path / "b.jsonl", "\n".join([json.dumps(shape)] + [filler] * 200 + [json.dumps(later)]) + "\n")
    assert [x["name"] for x in RF.last_request_tools(str(both)) or []] == ["mcp__gh__a"]


def test_reader_skips_a_fifo_named_like_a_rule_and_follows_a_symlinked_claude_md(tree: tuple[Path, Path]) -> None:
    home, proj = tree
    os.mkfifo(proj / ".claude" / "rules" / "pipe.md")  # open() for reading would wait for a writer forever
    real = proj / "docs" / "agents.md"
    _w(real, "# Shared\n\nKeep totals in cents.\n")
    (proj / "CLAUDE.md").unlink()
    (proj / "CLAUDE.md").symlink_to(real)
    inp = RF.read_inputs(str(proj), home=str(home), env={})
    assert "pipe.md" not in {Path(i.path).name for i in inp["instructions"]}
    assert any(i.kind == "project" and "Keep totals in cents." in i.text for i in inp["instructions"])
