"""Finding 5: settings fail closed. With no environment the app is in production mode, and without a
SECRET_KEY it refuses to start, saying why."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOW_DEBUG = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"


def run_settings(tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    env = clean | {"DJANGO_SETTINGS_MODULE": "hitl.settings", "HITL_VAR_DIR": str(tmp_path)} | env
    return subprocess.run([sys.executable, "-c", SHOW_DEBUG], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_no_environment_means_no_debug_and_no_start_without_a_secret_key(tmp_path):
    result = run_settings(tmp_path)

    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr and "DEBUG=1" in result.stderr


def test_a_secret_key_alone_starts_in_production_mode(tmp_path):
    result = run_settings(tmp_path, SECRET_KEY="k" * 50)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_debug_is_on_only_when_asked_for(tmp_path):
    assert run_settings(tmp_path, DEBUG="1").stdout.strip() == "True"
