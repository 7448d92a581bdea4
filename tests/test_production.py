"""Production settings: `check --deploy` is clean and responses carry the security headers."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADERS_SCRIPT = """
import json, django
django.setup()
from django.test import Client
response = Client().get("/accounts/login/", secure=True, headers={"Host": "hitl.example.com"})
insecure = Client().get("/accounts/login/", headers={"Host": "hitl.example.com"})
print(json.dumps({"status": response.status_code, "headers": dict(response.headers), "insecure": insecure.status_code,
                  "location": insecure.headers.get("Location", "")}))
"""


def production_env(tmp_path) -> dict:
    return os.environ | {
        "DJANGO_SETTINGS_MODULE": "hitl.settings",
        "DEBUG": "0",
        "SECRET_KEY": "x" * 20 + "production-test-key-with-enough-entropy-0123456789",
        "ALLOWED_HOSTS": "hitl.example.com",
        "HITL_VAR_DIR": str(tmp_path),
        "HITL_STATIC_ROOT": str(tmp_path / "static"),
    }


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=production_env(tmp_path), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_responses_carry_the_security_headers(tmp_path):
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"],
        cwd=ROOT, env=production_env(tmp_path), capture_output=True, text=True, timeout=300,
    )
    assert collected.returncode == 0, collected.stderr
    result = subprocess.run(
        [sys.executable, "-c", HEADERS_SCRIPT], cwd=ROOT, env=production_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    headers = seen["headers"]

    assert seen["status"] == 200
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert (seen["insecure"], seen["location"]) == (301, "https://hitl.example.com/accounts/login/")


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = production_env(tmp_path)
    del env["SECRET_KEY"]
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr
