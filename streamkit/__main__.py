from streamkit.cli import main
import sys

sys.exit(main())
