"""``python -m scoring`` is the ``litmus-review`` command."""

from .cli import main

main(prog_name="litmus-review")
