"""Finding 11: the proxy sets the forwarded headers the app trusts, from what it saw; nothing else
may reach a daphne that trusts them."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def nginx_conf() -> str:
    return (ROOT / "deploy" / "nginx.conf").read_text()


def test_nginx_never_forwards_a_clients_own_forwarded_headers():
    conf = re.sub(r"#.*", "", nginx_conf())

    assert "$http_x_forwarded" not in conf  # a client's X-Forwarded-Proto / -For, passed on
    assert "$proxy_add_x_forwarded_for" not in conf  # appends to what the client sent
    assert re.findall(r"proxy_set_header X-Forwarded-For (\S+);", conf) and set(
        re.findall(r"proxy_set_header X-Forwarded-For (\S+);", conf)
    ) == {"$remote_addr"}
    assert set(re.findall(r"proxy_set_header X-Forwarded-Proto (\S+);", conf)) == {"$scheme"}


def test_a_daphne_that_trusts_proxy_headers_is_reachable_only_through_the_proxy():
    dockerfile = (ROOT / "Dockerfile").read_text()
    compose = (ROOT / "docker-compose.yml").read_text()

    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD"))
    assert "--proxy-headers" not in cmd  # `docker run` on its own trusts no forwarded header
    web = compose[compose.index("  web1:") : compose.index("  worker:")]
    assert "--proxy-headers" in web and "ports:" not in web  # behind nginx only
