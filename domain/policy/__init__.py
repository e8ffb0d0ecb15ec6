"""The router's policy as data, where both the router (`domain/router/`) and live dispatch (`domain/dispatch/`) read
it: the document and its knobs (`document.py`), its rules compiled (`rules.py`), and the version in force
(`in_force.py`). Its versions' history and the evidence a rule must earn before going live stay with the router
(`domain/router/policy_versions.py`), which judges them by the scorecard."""
