"""What a tool's server says of it (MCP tool annotations), in words for whoever decides: hints the
server may get wrong, shown as "the server says", never as a guarantee. The spec's defaults hold
for what a server leaves out: not read-only, destructive, reaching the outside world."""


def server_hints(annotations: dict | None) -> list[str]:
    annotations = annotations or {}
    if annotations.get("readOnlyHint"):
        return ["read-only"]
    said = ["destructive" if annotations.get("destructiveHint", True) else "changes things (not destructive)"]
    if annotations.get("openWorldHint", True):
        said.append("reaches the outside world")
    return said
