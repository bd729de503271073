"""Per-call policy: traversal variants, SSRF (literal and resolved), rate limits on a fake clock, budgets, caps."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp.types import CallToolResult, TextContent

from hanzo_hub.config import SandboxSettings, ServerPolicySpec, ToolPolicySpec
from hanzo_hub.sandbox.policy import PolicyEngine
from hanzo_hub.sandbox.vault import Redactor

FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
URL_SCHEMA = {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "alice", tmp_path / "bob"
    for p in (a, b):
        (p / "src").mkdir(parents=True)
        (p / "src" / "main.py").write_text("")
    (a / "escape").symlink_to(b)
    return a, b


@pytest.fixture
def engine(roots: tuple[Path, Path]) -> PolicyEngine:
    settings = SandboxSettings(
        roots={"alice": (roots[0],), "bob": (roots[1],)},
        servers={"web": ServerPolicySpec(category="web"), "intranet": ServerPolicySpec(
            category="web", defaults=ToolPolicySpec(allow_private_network=True))},
    )  # fmt: skip
    return PolicyEngine(settings, clock=FakeClock())


async def test_paths_inside_the_users_root_are_allowed(engine: PolicyEngine, roots: tuple[Path, Path]) -> None:
    for value in ("src/main.py", str(roots[0] / "src"), "./src/../src/main.py", "new-file.txt"):
        decision = await engine.check_call("alice", "fs", "read", {"path": value}, FILE_SCHEMA)
        assert decision.allowed, (value, decision.reason)


@pytest.mark.parametrize(
    "value",
    [
        "../bob/src/main.py",
        "src/../../bob/src/main.py",
        "/etc/passwd",
        "escape/src/main.py",
        "\uff0e\uff0e/bob/src/main.py",
        "src/\uff0e\uff0e/\uff0e\uff0e/bob",
        "%2e%2e/bob/src/main.py",
        "..\\bob\\src\\main.py",
        "~/.ssh/id_rsa",
        "file:///etc/passwd",
        "src/main.py\x00.txt",
    ],
)
async def test_path_traversal_variants_are_denied(engine: PolicyEngine, value: str) -> None:
    decision = await engine.check_call("alice", "fs", "read", {"path": value}, FILE_SCHEMA)
    assert not decision.allowed
    assert decision.limit == "path"


async def test_another_users_root_and_unknown_users_are_denied(engine: PolicyEngine, roots: tuple[Path, Path]) -> None:
    assert not (await engine.check_call("alice", "fs", "read", {"path": str(roots[1])}, FILE_SCHEMA)).allowed
    assert not (await engine.check_call("mallory", "fs", "read", {"path": "x"}, FILE_SCHEMA)).allowed
    assert (await engine.check_call("bob", "fs", "read", {"path": str(roots[1] / "src")}, FILE_SCHEMA)).allowed


async def test_project_narrows_the_roots(engine: PolicyEngine, roots: tuple[Path, Path]) -> None:
    project = roots[0] / "src"
    ok = await engine.check_call("alice", "fs", "read", {"path": "main.py"}, FILE_SCHEMA, project=project)
    assert ok.allowed
    out = await engine.check_call("alice", "fs", "read", {"path": str(roots[0] / "x")}, FILE_SCHEMA, project=project)
    assert not out.allowed


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.1:8080/",
        "http://2130706433/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fd00::1]/",
        "http://10.0.0.5/",
        "http://192.168.1.1/",
        "http://localhost:8000/",
        "http://LOCALHOST./",
        "http://0.0.0.0/",
        "gopher://example.com/",
    ],
)
async def test_ssrf_targets_are_denied(engine: PolicyEngine, url: str) -> None:
    decision = await engine.check_call("alice", "web", "fetch", {"url": url}, URL_SCHEMA)
    assert not decision.allowed
    assert decision.limit == "url"


async def test_file_urls_are_confined_to_the_roots_like_paths(engine: PolicyEngine, roots: tuple[Path, Path]) -> None:
    outside = await engine.check_call("alice", "web", "fetch", {"url": "file:///etc/passwd"}, URL_SCHEMA)
    assert not outside.allowed
    assert outside.limit == "path"
    other_user = (roots[1] / "x.txt").as_uri()
    assert not (await engine.check_call("alice", "web", "fetch", {"url": other_user}, URL_SCHEMA)).allowed
    inside = (roots[0] / "page.html").as_uri()
    assert (await engine.check_call("alice", "web", "fetch", {"url": inside}, URL_SCHEMA)).allowed


async def test_public_address_and_granted_private_network_are_allowed(engine: PolicyEngine) -> None:
    assert (await engine.check_call("alice", "web", "fetch", {"url": "https://93.184.216.34/"}, URL_SCHEMA)).allowed
    granted = await engine.check_call("alice", "intranet", "fetch", {"url": "http://127.0.0.1:9/"}, URL_SCHEMA)
    assert granted.allowed


async def test_allow_and_deny_lists(roots: tuple[Path, Path]) -> None:
    policy = ToolPolicySpec(allow_hosts=("*.example.com",), deny_hosts=("evil.example.com",))
    engine = PolicyEngine(SandboxSettings(servers={"web": ServerPolicySpec(defaults=policy)}))
    denied = await engine.check_call("u", "web", "fetch", {"url": "https://evil.example.com/"}, URL_SCHEMA)
    other = await engine.check_call("u", "web", "fetch", {"url": "https://93.184.216.34/"}, URL_SCHEMA)
    assert not denied.allowed
    assert not other.allowed


async def test_web_rate_limit_is_exceeded_and_recovers(engine: PolicyEngine) -> None:
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    args = {"url": "https://93.184.216.34/"}
    for _ in range(10):
        assert (await engine.check_call("alice", "web", "fetch", args, URL_SCHEMA)).allowed
    limited = await engine.check_call("alice", "web", "fetch", args, URL_SCHEMA)
    assert not limited.allowed
    assert limited.limit == "rate"
    assert (await engine.check_call("bob", "web", "fetch", args, URL_SCHEMA)).allowed  # per user
    clock.now += 6.0  # 10 per minute: one token every 6 s
    assert (await engine.check_call("alice", "web", "fetch", args, URL_SCHEMA)).allowed
    assert not (await engine.check_call("alice", "web", "fetch", args, URL_SCHEMA)).allowed


async def test_turn_and_session_budgets(roots: tuple[Path, Path]) -> None:
    engine = PolicyEngine(SandboxSettings(calls_per_session=30))
    for _ in range(25):
        assert (await engine.check_call("u", "s", "t", {}, None, session="s1", turn="1")).allowed
    over = await engine.check_call("u", "s", "t", {}, None, session="s1", turn="1")
    assert over.limit == "turn_budget"
    for _ in range(5):
        assert (await engine.check_call("u", "s", "t", {}, None, session="s1", turn="2")).allowed
    assert (await engine.check_call("u", "s", "t", {}, None, session="s1", turn="3")).limit == "session_budget"
    engine.end_session("s1")
    assert (await engine.check_call("u", "s", "t", {}, None, session="s1", turn="4")).allowed


async def test_dry_run_spends_nothing(engine: PolicyEngine) -> None:
    args = {"url": "https://93.184.216.34/"}
    for _ in range(20):
        assert (await engine.check_call("alice", "web", "fetch", args, URL_SCHEMA, consume=False)).allowed


def test_oversized_result_is_truncated_with_a_notice_and_secrets_redacted() -> None:
    engine = PolicyEngine(SandboxSettings(), redact=Redactor({"TOKEN": "sk-abcdef123456"}).redact)
    result = CallToolResult(content=[TextContent(type="text", text="sk-abcdef123456 " + "x" * 5000)])
    filtered = engine.filter_result(result, max_bytes=1000)
    texts = [b.text for b in filtered.content if isinstance(b, TextContent)]
    assert texts[0].startswith("[redacted:TOKEN] ")
    assert len(texts[0].encode()) <= 1000
    assert "truncated" in texts[-1]
    small = engine.filter_result(CallToolResult(content=[TextContent(type="text", text="ok")]), max_bytes=1000)
    assert [b.text for b in small.content if isinstance(b, TextContent)] == ["ok"]


async def test_decisions_are_audited_without_argument_values(
    engine: PolicyEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hanzo_hub.audit")
    await engine.check_call("alice", "fs", "read", {"path": "/etc/passwd", "api_key": "sk-secret-value"}, FILE_SCHEMA)
    record = caplog.records[-1]
    assert record.audit["allowed"] is False  # type: ignore[attr-defined]
    assert record.audit["arguments"] == ["api_key", "path"]  # type: ignore[attr-defined]
    assert "sk-secret-value" not in caplog.text
    assert "/etc/passwd" not in caplog.text


def test_policy_merge_order(engine: PolicyEngine) -> None:
    web = engine.policy_for("web", "fetch")
    assert web.rate_per_minute == 10
    assert web.max_result_bytes == 1024 * 1024
    declared = engine.policy_for("other", "t", category="code", declared=ToolPolicySpec(timeout=5))
    assert declared.timeout == 5
    assert engine.policy_for("other", "t", category="code").timeout == 60
