import sys

from streamkit.cli import main

sys.exit(main())
