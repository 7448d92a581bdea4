from pathlib import Path

import pytest

from chat.demo_tools import calculator
from chat.tools import ToolArgumentsError, ToolContext, ToolError, arguments_hash, registry


class FakeAgent:
    fetch_allowlist = ["example.com"]
    allow_private_fetch = False


def context(tmp_path: Path) -> ToolContext:
    return ToolContext(conversation_id="c1", agent=FakeAgent(), sandbox=tmp_path / "box")


def test_schema_comes_from_type_hints():
    schema = registry.get("write_file").openai_schema()
    assert schema["function"]["name"] == "write_file"
    assert schema["function"]["parameters"]["required"] == ["path", "content"]
    assert "context" not in schema["function"]["parameters"]["properties"]


def test_validation_rejects_missing_extra_and_wrong_type_arguments():
    spec = registry.get("write_file")
    with pytest.raises(ToolArgumentsError, match="content"):
        spec.validate({"path": "a.txt"})
    with pytest.raises(ToolArgumentsError, match="mode"):
        spec.validate({"path": "a.txt", "content": "x", "mode": "w"})
    with pytest.raises(ToolArgumentsError, match="JSON object"):
        spec.validate(["a.txt"])


def test_sandbox_refuses_paths_that_escape(tmp_path):
    (tmp_path / "secret.txt").write_text("do not read")
    spec = registry.get("read_file")
    for path in ["../secret.txt", "/etc/passwd", "a/../../secret.txt"]:
        with pytest.raises(ToolError, match="outside the sandbox"):
            spec.run({"path": path}, context(tmp_path))


def test_sandbox_refuses_symlinks_that_lead_outside(tmp_path):
    ctx = context(tmp_path)
    ctx.sandbox.mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("do not read")
    (ctx.sandbox / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ToolError, match="outside the sandbox"):
        registry.get("read_file").run({"path": "link.txt"}, ctx)


def test_files_are_written_listed_read_and_deleted_in_the_sandbox(tmp_path):
    ctx = context(tmp_path)
    registry.get("write_file").run({"path": "notes/a.txt", "content": "hello"}, ctx)
    assert (ctx.sandbox / "notes" / "a.txt").read_text() == "hello"
    assert registry.get("list_directory").run({"path": "."}, ctx) == "notes/"
    assert registry.get("read_file").run({"path": "notes/a.txt"}, ctx) == "hello"
    registry.get("delete_file").run({"path": "notes/a.txt"}, ctx)
    assert not (ctx.sandbox / "notes" / "a.txt").exists()


def test_calculator_evaluates_arithmetic_without_eval():
    assert calculator("(2 + 3) * 4") == "(2 + 3) * 4 = 20"
    assert calculator("7 / 2") == "7 / 2 = 3.5"
    for expression in ["__import__('os').system('true')", "2 ** 1000000", "1/0", "abc"]:
        with pytest.raises(ToolError):
            calculator(expression)


def test_web_fetch_refuses_private_addresses_unless_allowed(tmp_path):
    with pytest.raises(ToolError, match="private address"):
        registry.get("web_fetch").run({"url": "http://127.0.0.1:9/"}, context(tmp_path))


def test_arguments_hash_ignores_key_order_but_not_values():
    assert arguments_hash({"a": 1, "b": "x"}) == arguments_hash({"b": "x", "a": 1})
    assert arguments_hash({"a": 1}) != arguments_hash({"a": 2})
