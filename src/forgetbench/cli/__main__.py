"""`python -m forgetbench.cli`, as the `forgetbench` console script."""

from forgetbench.cli.main import main

if __name__ == "__main__":  # imported, as by the package walk in the tests, it runs nothing
    raise SystemExit(main())
