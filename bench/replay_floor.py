"""The floor for `svc replay`: read the same file line by line, parse each line and validate it with the same
fast validator (jsonschema-rs), and do nothing else."""

import json
import sys

from contracts import conforms
from contracts.envelope import ENVELOPE

valid = 0
with open(sys.argv[1], encoding="utf-8") as lines:
    for line in lines:
        valid += conforms(ENVELOPE, json.loads(line))
print(valid)
