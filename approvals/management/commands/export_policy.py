"""`manage.py export_policy`: print the whole policy as YAML (approvals.policy.files), for a team to
keep in git, review, and apply again with import_policy."""
from django.core.management.base import BaseCommand

from approvals.policy import files as policy_files, versions as policy_versions


class Command(BaseCommand):
    help = "Print the policy (agents' gates, standing rules, routes, tool servers' trust, links and pins) as YAML."

    def handle(self, *args, **options) -> None:
        version = policy_versions.current_number()
        self.stdout.write(f"# hitl policy, version {version if version is not None else 'none yet'}\n", ending="")
        self.stdout.write(policy_files.dump(policy_versions.policy_document()), ending="")
