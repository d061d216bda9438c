"""`python -m forgetbench.options > docs/config.md`: the configuration reference."""

from forgetbench.options.reference import config_reference

if __name__ == "__main__":  # imported, as by the package walk in the tests, it runs nothing
    print(config_reference(), end="")
