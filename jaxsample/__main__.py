"""``python -m jaxsample``: the command line (:mod:`jaxsample.cli`)."""

import sys

from jaxsample.cli import main

if __name__ == "__main__":  # importing the module (documentation tools do) runs nothing
    sys.exit(main())
