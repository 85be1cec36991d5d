"""``python -m sharewise``: the same as the ``sharewise`` command."""

from sharewise.cli import main

if __name__ == "__main__":
    main()
