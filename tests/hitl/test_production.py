"""Production settings: `check --deploy` is clean and responses carry the security headers."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def by_hand_env(tmp_path) -> dict:
    """A developer's shell: none of the variables make exports."""
    unset = ("DEBUG", "SECRET_KEY", "HITL_BASE_URL", "HITL_PORT", "DJANGO_SETTINGS_MODULE")
    return {k: v for k, v in os.environ.items() if k not in unset} | {"PYTHONPATH": str(ROOT), "HITL_VAR_DIR": str(tmp_path)}


SHOW_SETTINGS = "from django.conf import settings; print(settings.DEBUG, settings.HITL_BASE_URL)"


def test_a_command_typed_by_hand_runs_with_the_defaults_make_wrote(tmp_path):
    """`make run PORT=9123` writes var/development.env; manage.py, run without DEBUG=1, reads it: debug on,
    and the links (HITL_BASE_URL) on the port it serves."""
    checkout = tmp_path / "checkout"
    (checkout / "var").mkdir(parents=True)
    (checkout / "manage.py").write_text((ROOT / "manage.py").read_text())
    (checkout / "var" / "development.env").write_text("# Written by make\nDEBUG=1\nHITL_PORT=9123\n")
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", SHOW_SETTINGS], cwd=checkout, env=by_hand_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.split()[-2:] == ["True", "http://localhost:9123"], result.stdout + result.stderr

    # What the environment says wins: production stays closed whatever the file says.
    closed = subprocess.run([sys.executable, "manage.py", "check"], cwd=checkout, env=by_hand_env(tmp_path) | {"DEBUG": "0"},
                            capture_output=True, text=True, timeout=120)
    assert closed.returncode != 0 and "SECRET_KEY must be set" in closed.stderr
    # Set, HITL_BASE_URL is what links point at, whatever the port.
    told = subprocess.run([sys.executable, "manage.py", "shell", "-c", SHOW_SETTINGS], cwd=checkout,
                          env=by_hand_env(tmp_path) | {"HITL_BASE_URL": "https://hitl.example.com/"}, capture_output=True, text=True, timeout=120)
    assert told.stdout.split()[-1] == "https://hitl.example.com", told.stdout + told.stderr


def test_without_the_defaults_file_a_command_fails_closed(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "manage.py").write_text((ROOT / "manage.py").read_text())
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=checkout, env=by_hand_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr


def test_the_image_leaves_this_machines_state_out():
    """The Dockerfile copies the checkout: var/ (its database, the development defaults) never goes in."""
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "var/" in ignored and ".venv/" in ignored
