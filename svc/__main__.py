from svc.cli import main

raise SystemExit(main())
