import sys

from fourfold.cli import main

sys.exit(main())
