"""A module that draws from the global ``random`` when it is first imported, as ``rich`` does
(``rich/style.py``: ``count(getrandbits(24))``). Whether a run imports it for the first time
depends on what the process imported before the run."""

import random

FIRST_DRAW = random.getrandbits(24)
