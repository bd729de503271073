"""``python -m hanzo_hub`` runs the command line."""

from hanzo_hub.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
