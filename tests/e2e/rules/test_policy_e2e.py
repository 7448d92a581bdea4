"""Policy as code on the real stack: rules made through the API on daphne are versions; the policy
exported and imported again by `manage.py` in their own processes is a no-op; an edited file's dry
run changes nothing, --apply makes one version, and a call asked after it records that version."""
import subprocess
import sys

import pytest

from approvals.models import Approval, PolicyVersion, Rule
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e


def manage(stack, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], env=stack.env, capture_output=True, text=True, timeout=60)


def test_export_then_import_is_a_no_op_and_an_applied_edit_is_the_version_later_calls_record(e2e, api_for, alice, bob, agent, tmp_path):
    made = api_for(bob).post("rules", {"effect": "ask", "tool": "read_file", "arguments": {"path": "secrets/*"}, "scope": "agent", "agent": agent.slug})
    assert made.status_code in (200, 201), made.text
    assert PolicyVersion.objects.order_by("-number").first().changes[0]["object"] == f"rule #{made.json()['id']}"

    exported = manage(e2e, "export_policy")
    assert exported.returncode == 0, exported.stderr
    path = tmp_path / "policy.yaml"
    path.write_text(exported.stdout)
    same = manage(e2e, "import_policy", str(path), "--apply")
    assert same.returncode == 0 and same.stdout.strip() == "no changes", same.stdout + same.stderr

    path.write_text(exported.stdout.replace("max_auto_approve_risk: medium", "max_auto_approve_risk: low"))
    versions = PolicyVersion.objects.count()
    dry = manage(e2e, "import_policy", str(path))
    assert '"medium" → "low"' in dry.stdout and PolicyVersion.objects.count() == versions
    applied = manage(e2e, "import_policy", str(path), "--apply", "--by", "bob")
    assert applied.returncode == 0, applied.stderr
    version = PolicyVersion.objects.order_by("-number").first()
    assert PolicyVersion.objects.count() == versions + 1 and version.created_by == bob

    started = api_for(alice).post("conversations", {"agent": agent.slug, "message": "delete a.txt"})
    assert started.status_code == 201, started.text
    approval = wait_until(lambda: Approval.objects.filter(conversation_id=started.json()["id"]).first(), timeout=15, message="the call to wait")
    assert approval.policy_version == version.number
    assert api_for(alice).get(f"approvals/{approval.pk}").json()["policy_version"] == version.number
    assert Rule.objects.filter(tool="read_file", enabled=True).count() == 1
