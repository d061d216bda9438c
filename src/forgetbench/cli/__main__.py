"""`python -m forgetbench.cli`, as the `forgetbench` console script."""

from forgetbench.cli.main import main

raise SystemExit(main())
