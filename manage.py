#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys
from pathlib import Path

# Written by `make run` (and `make setup`) on a developer's machine: the defaults it runs with
# (DEBUG=1, its port), so that a command typed by hand here runs as the app it set up does. Without
# it (a production image: .dockerignore keeps var/ out) settings fail closed.
DEVELOPMENT_DEFAULTS = Path(__file__).resolve().parent / "var" / "development.env"


def use_development_defaults() -> None:
    """Each NAME=value line of DEVELOPMENT_DEFAULTS, unless the environment sets NAME itself."""
    if not DEVELOPMENT_DEFAULTS.is_file():
        return
    for line in DEVELOPMENT_DEFAULTS.read_text().splitlines():
        name, assigned, value = line.partition("=")
        if assigned and not name.lstrip().startswith("#"):
            os.environ.setdefault(name.strip(), value.strip())


def main() -> None:
    use_development_defaults()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
