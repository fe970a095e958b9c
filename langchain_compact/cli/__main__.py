"""``python -m langchain_compact.cli``: the ``langchain-compact`` command."""

import sys

from langchain_compact.cli import main

if __name__ == "__main__":
    sys.exit(main())
