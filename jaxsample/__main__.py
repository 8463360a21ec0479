import sys

from jaxsample.cli import main

sys.exit(main())
