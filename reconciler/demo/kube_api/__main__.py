"""`python -m reconciler.demo.kube_api`: serve the fake API in this process (process.py)."""

from reconciler.demo.kube_api.process import main

raise SystemExit(main())
