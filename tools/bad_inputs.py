"""Run leoguard's corpus of bad inputs (python/leoguard/badinputs.py) and print, or with --write FILE
also write, the table of what each gets (docs/errors.md). Exit status 1 below 98 % clear."""

import sys

from leoguard.badinputs import main

sys.exit(main())
