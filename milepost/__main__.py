import sys

from milepost.cli.main import main

sys.exit(main())
